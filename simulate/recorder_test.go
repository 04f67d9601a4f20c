package simulate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift"
)

// TestCreatedFields checks that a create's fields are those
// drift.FieldsBetween gives between nothing and the created object's
// content, without the values.
func TestCreatedFields(t *testing.T) {
	for _, obj := range []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "resourceVersion": "3",
			"managedFields": []any{map[string]any{"manager": "m"}}}, "data": map[string]any{"k": "v"}},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "w", "namespace": "shop"},
			"spec": map[string]any{"replicas": int64(1)}, "status": map[string]any{}},
		{"apiVersion": "x/v1", "kind": "Odd", "metadata": map[string]any{"name": "o"}, "a/b~c": "escaped"},
	} {
		after := &unstructured.Unstructured{Object: obj}
		want := drift.FieldsBetween(nil, content(after))
		for i := range want {
			want[i].Live = nil
		}
		got := createdFields(after)
		if len(got) == 0 {
			t.Fatalf("%s: no fields", after.GetKind())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: createdFields differs from FieldsBetween (-want +got):\n%s", after.GetKind(), diff)
		}
	}
}
