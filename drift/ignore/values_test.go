package ignore

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestValueAtAndSetAt(t *testing.T) {
	const doc = `{"spec": {"replicas": 3, "containers": [{"name": "app", "image": "a"}], "nil": null}, "s": "x"}`
	for _, tc := range []struct {
		pointer string
		value   any
		ok      bool
		setOK   bool
		after   string // the document after SetAt(pointer, "v"), when setOK
	}{
		{pointer: "", value: nil, ok: true, setOK: false},
		{pointer: "/spec/replicas", value: 3.0, ok: true, setOK: true,
			after: `{"spec": {"replicas": "v", "containers": [{"name": "app", "image": "a"}], "nil": null}, "s": "x"}`},
		{pointer: "/spec/containers/0/image", value: "a", ok: true, setOK: true,
			after: `{"spec": {"replicas": 3, "containers": [{"name": "app", "image": "v"}], "nil": null}, "s": "x"}`},
		{pointer: "/spec/containers/1/image", setOK: false},
		{pointer: "/spec/containers/-1", setOK: false},
		{pointer: "/spec/containers/x", setOK: false},
		{pointer: "/s/deeper", setOK: false},
		{pointer: "/spec/nil/made", setOK: true,
			after: `{"spec": {"replicas": 3, "containers": [{"name": "app", "image": "a"}], "nil": {"made": "v"}}, "s": "x"}`},
		{pointer: "/new/map", setOK: true,
			after: `{"spec": {"replicas": 3, "containers": [{"name": "app", "image": "a"}], "nil": null}, "s": "x", "new": {"map": "v"}}`},
	} {
		var d map[string]any
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		toks, err := ParsePointer(tc.pointer)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := ValueAt(d, toks)
		if tc.pointer == "" {
			v, tc.value = nil, nil // the whole document
		}
		if ok != tc.ok || !reflect.DeepEqual(v, tc.value) {
			t.Errorf("ValueAt(%q) = %v, %v; want %v, %v", tc.pointer, v, ok, tc.value, tc.ok)
		}
		if got := SetAt(d, toks, "v"); got != tc.setOK {
			t.Errorf("SetAt(%q) = %v, want %v", tc.pointer, got, tc.setOK)
			continue
		}
		want := doc
		if tc.setOK {
			want = tc.after
		}
		var w map[string]any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d, w) {
			t.Errorf("after SetAt(%q): %v, want %v", tc.pointer, d, w)
		}
	}
	if SetAt(nil, []string{"a"}, 1) {
		t.Error("SetAt on a nil document succeeded")
	}
	if _, ok := ValueAt(nil, []string{"a"}); ok {
		t.Error("ValueAt in a nil document found something")
	}
}
