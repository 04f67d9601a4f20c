package flux

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	kustomize "github.com/fluxcd/pkg/kustomize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/truce-dev/truce/manifest"
)

// reference builds k the way kustomize-controller does, with
// fluxcd/pkg/kustomize run directly: a copy of root, the generator writing
// the kustomization file into it, SecureBuild, SubstituteVariables per
// object, then the owner labels and commonMetadata.
func reference(t *testing.T, root string, k *unstructured.Unstructured, world []*unstructured.Unstructured) []map[string]any {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(tmp, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	specPath, _, _ := unstructured.NestedString(k.Object, "spec", "path")
	dir := filepath.Join(tmp, specPath)
	if _, err := kustomize.NewGenerator(tmp, *k).WriteFile(dir); err != nil {
		t.Fatalf("reference generator: %v", err)
	}
	m, err := kustomize.SecureBuild(tmp, dir, false)
	if err != nil {
		t.Fatalf("reference build: %v", err)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(k.Object, "spec", "postBuild"); ok {
		keys := map[objectKey]bool{}
		for _, u := range world {
			keys[objectKey{u.GetKind(), u.GetNamespace(), u.GetName()}] = true
		}
		found, err := lookup(world, keys)
		if err != nil {
			t.Fatal(err)
		}
		var c client.Client
		if c, err = worldClient(found); err != nil {
			t.Fatal(err)
		}
		strategy, _, _ := unstructured.NestedString(k.Object, "spec", "postBuild", "substituteStrategy")
		for _, res := range m.Resources() {
			if _, err := kustomize.SubstituteVariables(context.Background(), c, *k, res,
				kustomize.SubstituteWithAlways(strategy == "Always")); err != nil {
				t.Fatalf("reference substitution: %v", err)
			}
		}
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode("reference", bytes.NewReader(y), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	us := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		us[i] = o.Object
	}
	ssautil.SetCommonMetadata(us, map[string]string{ownerNameLabel: k.GetName(), ownerNamespaceLabel: k.GetNamespace()}, nil)
	labels, _, _ := unstructured.NestedStringMap(k.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(k.Object, "spec", "commonMetadata", "annotations")
	if labels != nil || annotations != nil {
		ssautil.SetCommonMetadata(us, labels, annotations)
	}
	out := make([]map[string]any, len(us))
	for i, u := range us {
		out[i] = u.Object
	}
	return out
}

const parityWorld = `
apiVersion: v1
kind: ConfigMap
metadata: {name: vars, namespace: flux-system}
data: {region: us-east-1, tier: gold}
---
apiVersion: v1
kind: Secret
metadata: {name: secret-vars, namespace: flux-system}
stringData: {greeting: hush}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: vars, namespace: elsewhere}
data: {region: wrong-namespace}
`

func TestBuildParity(t *testing.T) {
	root, err := filepath.Abs("testdata/parity")
	if err != nil {
		t.Fatal(err)
	}
	var world []*unstructured.Unstructured
	for _, doc := range bytes.Split([]byte(parityWorld), []byte("\n---\n")) {
		world = append(world, object(t, string(doc)))
	}
	tests := []struct {
		name string
		spec string
	}{
		{"no kustomization file", `path: ./plain`},
		{"existing kustomization with base and generator", `path: ./kust`},
		{"patches", `
path: ./plain
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
      spec:
        replicas: 5
  - patch: |
      - op: add
        path: /metadata/annotations
        value: {patched: "yes"}
    target:
      kind: ConfigMap
      name: settings`},
		{"images", `
path: ./kust
images:
  - name: busybox
    newName: registry.local/busybox
  - name: nginx
    newTag: "9"`},
		{"targetNamespace", `path: ./plain
targetNamespace: prod`},
		{"namePrefix and nameSuffix", `path: ./kust
namePrefix: pre-
nameSuffix: -suf`},
		{"components", `path: ./kust
components: [../comp]`},
		{"postBuild substitute", `path: ./plain
postBuild:
  substitute: {greeting: hello, region: eu-west-1}`},
		{"postBuild substituteFrom with optional missing", `path: ./plain
postBuild:
  substitute: {tier: silver}
  substituteFrom:
    - {kind: ConfigMap, name: vars}
    - {kind: Secret, name: secret-vars}
    - {kind: ConfigMap, name: absent, optional: true}`},
		{"defaults with substituteStrategy Always", `path: ./kust
postBuild:
  substituteStrategy: Always`},
		{"empty postBuild leaves defaults alone", `path: ./kust
postBuild: {}`},
		{"commonMetadata", `path: ./plain
commonMetadata:
  labels: {team: a, kustomize.toolkit.fluxcd.io/name: overridden}
  annotations: {owner: me}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := object(t, "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"+
				"metadata: {name: app, namespace: flux-system}\nspec:\n  "+indent(tt.spec))
			want := reference(t, root, k, world)
			objs, err := build(t, root, k, world...)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			got := make([]map[string]any, len(objs))
			for i, o := range objs {
				got[i] = o.Object.Object
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Build differs from fluxcd/pkg/kustomize (-want +got):\n%s", diff)
			}
			for _, o := range objs {
				if o.Source.Kustomization == "" || o.Source.File == "" {
					t.Errorf("%s/%s has no source: %+v", o.Object.GetKind(), o.Object.GetName(), o.Source)
				}
			}
		})
	}
}

func indent(s string) string {
	return string(bytes.ReplaceAll(bytes.TrimLeft([]byte(s), "\n"), []byte("\n"), []byte("\n  ")))
}
