package admission

import (
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		a, b map[string]any
		want []string
	}{
		{name: "equal", a: map[string]any{"x": int64(1)}, b: map[string]any{"x": float64(1)}, want: nil},
		{name: "changed leaf", a: map[string]any{"x": "a"}, b: map[string]any{"x": "b"}, want: []string{"/x"}},
		{name: "added and removed", a: map[string]any{"x": "a"}, b: map[string]any{"y": "a"}, want: []string{"/x", "/y"}},
		{name: "escaped key", a: map[string]any{"m": map[string]any{"a/b~c": "1"}}, b: map[string]any{"m": map[string]any{"a/b~c": "2"}}, want: []string{"/m/a~1b~0c"}},
		{name: "list element", a: map[string]any{"l": []any{"a", "b"}}, b: map[string]any{"l": []any{"a", "c"}}, want: []string{"/l/1"}},
		{name: "list length", a: map[string]any{"l": []any{"a"}}, b: map[string]any{"l": []any{"a", "b"}}, want: []string{"/l"}},
		{name: "type change", a: map[string]any{"x": map[string]any{}}, b: map[string]any{"x": "s"}, want: []string{"/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(tt.a, tt.b); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWebhookPatchOwner(t *testing.T) {
	ps := webhookPatches(map[string]string{
		"patch.webhook.admission.k8s.io/round_0_index_1": `{"configuration":"c","webhook":"labels.example.com","patch":[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}],"patchType":"JSONPatch"}`,
		"patch.webhook.admission.k8s.io/round_1_index_0": `{"configuration":"c","webhook":"image.example.com","patch":[{"op":"replace","path":"/spec/image","value":"x"}],"patchType":"JSONPatch"}`,
		"unrelated": "x",
	})
	tests := []struct {
		round int
		path  string
		want  string
	}{
		{0, "/metadata/labels/a", "labels.example.com"},
		{0, "/metadata/labels", "labels.example.com"},
		{1, "/spec/image", "image.example.com"},
		{0, "/spec/image", ""},
	}
	for _, tt := range tests {
		if got := ps.owner(tt.round, tt.path); got != tt.want {
			t.Errorf("owner(%d, %s) = %q, want %q", tt.round, tt.path, got, tt.want)
		}
	}
}
