package flux

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
)

const rendered = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
spec:
  template:
    spec:
      containers:
        - name: web
          image: nginx:1.0
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: apps
  labels: {helm.toolkit.fluxcd.io/name: spoofed}
spec:
  ports: [{port: 80}]
`

func TestPostRender(t *testing.T) {
	in, err := manifest.Decode("templates", strings.NewReader(rendered), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i].Source = manifest.Source{File: "chart/templates/" + in[i].Object.GetKind() + ".yaml",
			Renderer: manifest.RendererHelm, RenderRoot: "chart"}
	}
	hr, err := ParseHelmRelease(object(t, `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: flux-system}
spec:
  chartRef: {kind: OCIRepository, name: web}
  commonMetadata:
    labels: {team: a}
    annotations: {owner: me}
  postRenderers:
    - kustomize:
        images: [{name: nginx, newName: registry.local/nginx, newTag: "2.0"}]
        patches:
          - target: {kind: Service}
            patch: |
              - op: add
                path: /spec/type
                value: NodePort
    - kustomize:
        patches:
          - patch: |
              apiVersion: apps/v1
              kind: Deployment
              metadata: {name: web, namespace: apps}
              spec: {replicas: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := PostRender(in, hr)
	if err != nil {
		t.Fatal(err)
	}
	dep, svc := byKindName(out, "Deployment", "web"), byKindName(out, "Service", "web")
	if dep == nil || svc == nil || len(out) != 2 {
		t.Fatalf("got %d objects", len(out))
	}
	checks := []struct {
		what string
		obj  *manifest.Object
		path []string
		want any
	}{
		{"image", dep, []string{"spec", "template", "spec", "containers"}, nil},
		{"patch 1", svc, []string{"spec", "type"}, "NodePort"},
		{"patch 2", dep, []string{"spec", "replicas"}, int64(3)},
		{"common label", dep, []string{"metadata", "labels", "team"}, "a"},
		{"common annotation", svc, []string{"metadata", "annotations", "owner"}, "me"},
		{"origin label", svc, []string{"metadata", "labels", helmOwnerNameLabel}, "web"},
		{"origin namespace", dep, []string{"metadata", "labels", helmOwnerNamespaceLabel}, "flux-system"},
	}
	for _, c := range checks {
		v, _, _ := unstructured.NestedFieldNoCopy(c.obj.Object.Object, c.path...)
		if c.what == "image" {
			v = v.([]any)[0].(map[string]any)["image"]
			c.want = "registry.local/nginx:2.0"
		}
		if v != c.want {
			t.Errorf("%s: %v = %#v, want %#v", c.what, c.path, v, c.want)
		}
	}
	if dep.Source.File != "chart/templates/Deployment.yaml" || svc.Source.Renderer != manifest.RendererHelm {
		t.Errorf("sources not kept: %v, %v", dep.Source, svc.Source)
	}
	var raw map[string]any
	if err := yamlOrJSON(dep.Raw, &raw); err != nil || raw["spec"].(map[string]any)["replicas"] != float64(3) {
		t.Errorf("Raw does not match the object: %s", dep.Raw)
	}
}

func TestPostRenderBadPatch(t *testing.T) {
	in, err := manifest.Decode("templates", strings.NewReader(rendered), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hr := &HelmRelease{Name: "web", Namespace: "ns", PostRenderers: []PostRenderer{{Kustomize: &KustomizePostRenderer{
		Patches: []Patch{{Patch: "- op: replace\n  path: /nope/deeper\n  value: 1", Target: &Selector{Kind: "Service"}}}}}}}
	if _, err := PostRender(in, hr); err == nil || !strings.Contains(err.Error(), "HelmRelease ns/web") {
		t.Errorf("err = %v, want a post-rendering error naming the HelmRelease", err)
	}
}

func yamlOrJSON(data []byte, v any) error {
	objs, err := manifest.Decode("raw", bytes.NewReader(data), manifest.Options{})
	if err != nil || len(objs) != 1 {
		return err
	}
	return json.Unmarshal(data, v)
}
