package flux

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

// object parses one YAML object.
func object(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("parsing test object: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// objects decodes a file into unstructured objects.
func objects(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode(file, bytes.NewReader(data), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.Object
	}
	return out
}

// byKindName finds an object among decoded ones.
func byKindName(objs []manifest.Object, kind, name string) *manifest.Object {
	for i := range objs {
		if objs[i].Object.GetKind() == kind && objs[i].Object.GetName() == name {
			return &objs[i]
		}
	}
	return nil
}

// writeFiles lays out files (relative path → content) under a new
// temporary directory.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func build(t testing.TB, root string, k *unstructured.Unstructured, world ...*unstructured.Unstructured) ([]manifest.Object, error) {
	t.Helper()
	return Build(context.Background(), k, BuildOptions{Root: root, Objects: world})
}
