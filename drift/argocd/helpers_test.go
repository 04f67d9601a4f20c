package argocd

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// obj decodes a YAML fixture the way a client decodes API objects (int64
// integers).
func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

func objOrNil(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	if y == "" {
		return nil
	}
	return obj(t, y)
}

// withLastApplied returns live annotated with orig as its
// last-applied-configuration, as kubectl apply or Argo CD's client-side apply
// leave it.
func withLastApplied(t *testing.T, live, orig *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live = live.DeepCopy()
	data, err := json.Marshal(orig.Object)
	if err != nil {
		t.Fatal(err)
	}
	a := live.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationLastAppliedConfig] = string(data)
	live.SetAnnotations(a)
	return live
}

// edit returns a copy of u changed by f.
func edit(u *unstructured.Unstructured, f func(m map[string]any)) *unstructured.Unstructured {
	u = u.DeepCopy()
	f(u.Object)
	return u
}

// at walks a fixture by map keys and list indexes; fixtures are trusted.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func mapAt(v any, path ...any) map[string]any { return at(v, path...).(map[string]any) }

func container0(m map[string]any) map[string]any {
	return mapAt(m, "spec", "template", "spec", "containers", 0)
}
