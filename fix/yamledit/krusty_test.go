package yamledit

import (
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestPatchWithKustomize applies a StrategicPatch added with
// AddKustomizePatch with kustomize itself and checks the rendered object.
func TestPatchWithKustomize(t *testing.T) {
	base := lines(
		"apiVersion: apps/v1",
		"kind: Deployment",
		"metadata:",
		"  name: web",
		"  namespace: prod",
		"spec:",
		"  replicas: 3",
		"  template:",
		"    spec:",
		"      containers:",
		"      - name: init",
		"        image: busybox",
		"      - name: nginx",
		"        image: nginx:1.27",
		"        env:",
		"        - {name: A, value: '1'}",
		"        - {name: B, value: '2'}",
		"        ports:",
		"        - {name: http, containerPort: 80}",
	)
	f, err := Parse("app/deploy.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	orig, _, err := f.Get(0, "")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]any{
		"/spec/template/spec/containers/1/image":        "registry.internal/nginx:1.27",
		"/spec/template/spec/containers/1/env/1/value":  "two",
		"/spec/template/spec/containers/1/ports/0/name": "web",
		"/spec/template/spec/containers/1/env/-":        map[string]any{"name": "C", "value": "$(A)"},
		"/spec/template/spec/containers/0/args":         []any{"--x"},
		"/spec/replicas":                                nil,
	}
	patch, err := StrategicPatch("apps/v1", "Deployment", "web", "prod", fields, orig.(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	kust, err := AddKustomizePatch("app/kustomization.yaml", []byte("resources:\n- deploy.yaml\n"), "app/patches/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fs := filesys.MakeFsInMemory()
	for p, b := range map[string][]byte{
		"/app/deploy.yaml": []byte(base), "/app/kustomization.yaml": kust, "/app/patches/web.yaml": patch,
	} {
		if err := fs.WriteFile(p, b); err != nil {
			t.Fatal(err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/app")
	if err != nil {
		t.Fatalf("kustomize: %v\n%s\n%s", err, kust, patch)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := sigsyaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	// The same edits made directly in the file.
	for p, v := range fields {
		if v == nil {
			err = f.Remove(0, p)
		} else {
			err = f.Set(0, p, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want, _, _ := f.Get(0, "")
	if !equalData(got, want) {
		t.Fatalf("kustomize rendered\n%s\nwant\n%s\npatch:\n%s", out, f.Bytes(), patch)
	}
}
