package gitops

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t testing.TB, source, doc string) Object {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("fixture %s: %v", source, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatalf("fixture %s: %v", source, err)
	}
	return Object{Source: source, Unstructured: u}
}
