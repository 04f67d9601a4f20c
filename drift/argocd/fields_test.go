package argocd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFields(t *testing.T) {
	tests := []struct {
		name            string
		predicted, live string // YAML; empty means nil
		want            []FieldChange
	}{
		{name: "both nil"},
		{
			name:      "equal",
			predicted: "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			live:      "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
		},
		{
			name:      "keys escaped, sorted, present on one side",
			predicted: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations: {a/b: x, c~d: yy, same: s}\n",
			live:      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations: {same: s, z: w}\n",
			want: []FieldChange{
				{Pointer: "/metadata/annotations/a~1b", Desired: "x", DesiredPresent: true},
				{Pointer: "/metadata/annotations/c~0d", Desired: "yy", DesiredPresent: true},
				{Pointer: "/metadata/annotations/z", Live: "w", LivePresent: true},
			},
		},
		{
			name:      "added subtree reported once",
			predicted: "apiVersion: apps/v1\nkind: Deployment\nspec: {strategy: {type: Recreate}}\n",
			live:      "apiVersion: apps/v1\nkind: Deployment\nspec: {}\n",
			want: []FieldChange{{
				Pointer: "/spec/strategy", Desired: map[string]any{"type": "Recreate"}, DesiredPresent: true,
			}},
		},
		{
			name:      "type change",
			predicted: "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			live:      "apiVersion: v1\nkind: ConfigMap\ndata: [a]\n",
			want: []FieldChange{{
				Pointer: "/data", Desired: map[string]any{"a": "b"}, Live: []any{"a"}, DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name: "keyed list items by live index, numeric order",
			predicted: `
apiVersion: v1
kind: Pod
spec:
  containers: [{name: a, image: a2}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}, {name: g}, {name: h}, {name: i}, {name: j}, {name: k, image: k2}]
`,
			live: `
apiVersion: v1
kind: Pod
spec:
  containers: [{name: a, image: a1}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}, {name: g}, {name: h}, {name: i}, {name: j}, {name: k, image: k1}]
`,
			want: []FieldChange{
				{Pointer: "/spec/containers/0/image", Desired: "a2", Live: "a1", DesiredPresent: true, LivePresent: true},
				{Pointer: "/spec/containers/10/image", Desired: "k2", Live: "k1", DesiredPresent: true, LivePresent: true},
			},
		},
		{
			name:      "keyed list with other keys is reported whole",
			predicted: "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: b}, {name: a}]\n",
			live:      "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a}, {name: b}]\n",
			want: []FieldChange{{
				Pointer:        "/spec/containers",
				Desired:        []any{map[string]any{"name": "b"}, map[string]any{"name": "a"}},
				Live:           []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}},
				DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:      "list of a custom resource is reported whole",
			predicted: "apiVersion: example.com/v1\nkind: Widget\nspec:\n  items: [{name: a, v: 1}]\n",
			live:      "apiVersion: example.com/v1\nkind: Widget\nspec:\n  items: [{name: a, v: 2}]\n",
			want: []FieldChange{{
				Pointer:        "/spec/items",
				Desired:        []any{map[string]any{"name": "a", "v": int64(1)}},
				Live:           []any{map[string]any{"name": "a", "v": int64(2)}},
				DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:      "unknown field of a built-in type",
			predicted: "apiVersion: v1\nkind: Pod\nspec:\n  extra: {list: [1]}\n",
			live:      "apiVersion: v1\nkind: Pod\nspec:\n  extra: {list: [2]}\n",
			want: []FieldChange{{
				Pointer: "/spec/extra/list", Desired: []any{int64(1)}, Live: []any{int64(2)}, DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name: "only live",
			live: "apiVersion: v1\nkind: ConfigMap\n",
			want: []FieldChange{{Pointer: "", Live: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}, LivePresent: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, l := objOrNil(t, tt.predicted), objOrNil(t, tt.live)
			got := Fields(p, l)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Fields (-want +got):\n%s", d)
			}
		})
	}
}

func TestFieldsNormalizesNumbers(t *testing.T) {
	p := obj(t, "apiVersion: v1\nkind: ConfigMap\nspec: {n: 1}\n")
	l := p.DeepCopy()
	p.Object["spec"].(map[string]any)["n"] = 1   // int
	l.Object["spec"].(map[string]any)["n"] = 1.0 // float64
	if got := Fields(p, l); len(got) != 0 {
		t.Errorf("Fields = %v, want none", got)
	}
}

func TestPointerLess(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"/a/2", "/a/10", true},
		{"/a/10", "/a/2", false},
		{"/a", "/a/0", true},
		{"/a/b", "/a/a", false},
		{"/a/x", "/a/1", false},
	} {
		if got := pointerLess(tt.a, tt.b); got != tt.want {
			t.Errorf("pointerLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
