package flux

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const example = "testdata/flux2-kustomize-helm-example"

// artifacts lays out the ExternalArtifacts of clusters/staging/artifacts.yaml
// with ArtifactCopy and returns their directories by name.
func artifacts(t *testing.T) map[string]string {
	t.Helper()
	var gen *unstructured.Unstructured
	for _, o := range objects(t, filepath.Join(example, "clusters/staging/artifacts.yaml")) {
		if o.GetKind() == "ArtifactGenerator" {
			gen = o
		}
	}
	if gen == nil {
		t.Fatal("no ArtifactGenerator in the fixture")
	}
	roots := map[string]string{}
	sources, _, _ := unstructured.NestedSlice(gen.Object, "spec", "sources")
	for _, s := range sources {
		// The GitRepository flux-system is the example repository.
		roots[s.(map[string]any)["alias"].(string)] = example
	}
	out := map[string]string{}
	arts, _, _ := unstructured.NestedSlice(gen.Object, "spec", "artifacts")
	for _, a := range arts {
		a := a.(map[string]any)
		var rules []CopyRule
		for _, c := range a["copy"].([]any) {
			c := c.(map[string]any)
			rules = append(rules, CopyRule{From: c["from"].(string), To: c["to"].(string)})
		}
		dst := filepath.Join(t.TempDir(), a["name"].(string))
		if err := ArtifactCopy(roots, rules, dst); err != nil {
			t.Fatalf("ArtifactCopy %s: %v", a["name"], err)
		}
		out[a["name"].(string)] = dst
	}
	return out
}

func TestBuildExampleStaging(t *testing.T) {
	arts := artifacts(t)
	ks := map[string]*unstructured.Unstructured{}
	for _, file := range []string{"apps.yaml", "infrastructure.yaml"} {
		for _, o := range objects(t, filepath.Join(example, "clusters/staging", file)) {
			if o.GetKind() == "Kustomization" {
				ks[o.GetName()] = o
			}
		}
	}
	tests := []struct {
		kustomization string
		want          []string // kind/namespace/name in order
		file          string   // where the first object was written
		check         func(t *testing.T, objs map[string]*unstructured.Unstructured)
	}{
		{
			kustomization: "apps",
			want:          []string{"Namespace//podinfo", "HelmRepository/podinfo/podinfo", "HelmRelease/podinfo/podinfo"},
			file:          "base/podinfo/namespace.yaml",
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				hr := objs["HelmRelease/podinfo/podinfo"]
				version, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
				hosts, _, _ := unstructured.NestedStringSlice(hr.Object, "spec", "values", "httpRoute", "hostnames")
				if version != ">=1.0.0-alpha" || len(hosts) != 1 || hosts[0] != "podinfo.staging" {
					t.Errorf("staging patch not applied: version %q, hostnames %v", version, hosts)
				}
			},
		},
		{
			kustomization: "infra-controllers",
			file:          "controllers/cert-manager.yaml",
		},
		{
			kustomization: "infra-configs",
			file:          "configs/cluster-issuers.yaml",
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				issuer := objs["ClusterIssuer//letsencrypt"]
				if issuer == nil {
					t.Fatal("no ClusterIssuer letsencrypt")
				}
				server, _, _ := unstructured.NestedString(issuer.Object, "spec", "acme", "server")
				if server != "https://acme-staging-v02.api.letsencrypt.org/directory" {
					t.Errorf("spec.patches not applied: server %q", server)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.kustomization, func(t *testing.T) {
			k := ks[tt.kustomization]
			ref, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "name")
			root := arts[ref]
			objs, err := build(t, root, k)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			byID := map[string]*unstructured.Unstructured{}
			var ids []string
			for _, o := range objs {
				id := o.Object.GetKind() + "/" + o.Object.GetNamespace() + "/" + o.Object.GetName()
				ids = append(ids, id)
				byID[id] = o.Object
				if o.Object.GetLabels()[ownerNameLabel] != tt.kustomization {
					t.Errorf("%s lacks the owner label", id)
				}
				if o.Source.Line == 0 || !strings.HasPrefix(o.Source.File, root) {
					t.Errorf("%s: source %v is not a line under %s", id, o.Source, root)
				}
			}
			if tt.want != nil && strings.Join(ids, " ") != strings.Join(tt.want, " ") {
				t.Errorf("objects = %v, want %v", ids, tt.want)
			}
			if got := objs[0].Source.File; got != filepath.Join(root, tt.file) {
				t.Errorf("first object from %s, want %s", got, filepath.Join(root, tt.file))
			}
			if tt.check != nil {
				tt.check(t, byID)
			}
		})
	}
}
