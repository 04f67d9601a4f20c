package admission

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// TestMemoKeyCoversRequest changes each field of a Request in turn: every
// field but Source (copied to the result, not admitted) must change the
// key, or two different writes share a remembered answer. A field added
// to Request later fails here until the key covers it.
func TestMemoKeyCoversRequest(t *testing.T) {
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"data":     map[string]any{"a": "1"},
	}}
	base := Request{Object: existing.DeepCopy()}
	gk := k8sschema.GroupKind{Kind: "ConfigMap"}
	m := &memo{mode: memoOn, store: newMemoStore(1)}
	baseKey, ok := m.key(base, gk, existing)
	if !ok {
		t.Fatal("the base request is not remembered")
	}
	ignored := map[string]bool{"Source": true}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if ignored[f.Name] {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			req := base
			req.Object = base.Object.DeepCopy()
			v := reflect.ValueOf(&req).Elem().Field(i)
			switch f.Name {
			case "Object":
				unstructured.SetNestedField(req.Object.Object, "2", "data", "a")
			default:
				switch v.Kind() {
				case reflect.String:
					v.SetString("x")
				case reflect.Bool:
					v.SetBool(true)
				case reflect.Slice:
					v.Set(reflect.MakeSlice(v.Type(), 1, 1))
					if e := v.Index(0); e.Kind() == reflect.String {
						e.SetString("x")
					} else {
						e.SetUint(1)
					}
				default:
					t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
				}
			}
			k, ok := m.key(req, gk, existing)
			if ok && k == baseKey {
				t.Errorf("changing %s leaves the memo key unchanged", f.Name)
			}
		})
	}
	// Without dryRun in any policy, Persist alone must not change the key.
	blind := &memo{mode: memoDryRunBlind, store: newMemoStore(1)}
	k1, _ := blind.key(base, gk, existing)
	persisted := base
	persisted.Persist = true
	if k2, _ := blind.key(persisted, gk, existing); k1 != k2 {
		t.Error("a dry-run-blind memo keys Persist")
	}
}
