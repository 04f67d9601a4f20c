package reconcile

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCounterpartMatchesListItemsByName(t *testing.T) {
	live := map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "app", "image": "a:1"},
	}}}
	payload := map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "sidecar", "image": "envoy:1"},
		map[string]any{"name": "app", "image": "a:2"},
	}}}
	cases := []struct {
		pointer string
		want    []string
		ok      bool
	}{
		{"/spec/containers/0/image", []string{"spec", "containers", "1", "image"}, true},
		{"/spec/replicas", []string{"spec", "replicas"}, true},
		{"/spec/containers/5/image", nil, false},
	}
	for _, tc := range cases {
		got, ok := counterpart(live, payload, parse(tc.pointer))
		if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%s: got %v %v, want %v %v", tc.pointer, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRemoveAndSet(t *testing.T) {
	doc := map[string]any{"a": []any{"x", "y", "z"}, "m": map[string]any{"k": "v"}}
	remove(doc, []string{"a", "1"})
	remove(doc, []string{"m", "k"})
	remove(doc, []string{"missing", "deep"})
	if !set(doc, []string{"n", "deep", "leaf"}, int64(1)) || set(doc, []string{"a", "9"}, "no") {
		t.Fatal("set")
	}
	want := `{"a":["x","z"],"m":{},"n":{"deep":{"leaf":1}}}`
	if b, _ := json.Marshal(doc); string(b) != want {
		t.Fatalf("got %s", b)
	}
}

// FuzzPointerHelpers: no document and pointer makes the helpers panic.
func FuzzPointerHelpers(f *testing.F) {
	f.Add(`{"spec":{"containers":[{"name":"a","image":"x"}]}}`, `{"spec":{"containers":[]}}`, "/spec/containers/0/image")
	f.Add(`[1,2]`, `{}`, "/0")
	f.Add(`{"a":[[1],[2]]}`, `{"a":[[3]]}`, "/a/1/0")
	f.Add(`{"a~b":{"c/d":1}}`, `{"a~b":{}}`, "/a~0b/c~1d")
	f.Add(`{"a":{"b":1}}`, `null`, "/a/b")
	f.Add(`{"a":{"b":1}}`, `{"a":null}`, "/a/b")
	f.Fuzz(func(t *testing.T, liveJSON, payloadJSON, pointer string) {
		var live, payload map[string]any
		if json.Unmarshal([]byte(liveJSON), &live) != nil || json.Unmarshal([]byte(payloadJSON), &payload) != nil {
			return
		}
		toks := parse(pointer)
		v, lok := get(live, toks)
		if ptoks, ok := counterpart(live, payload, toks); ok {
			if lok {
				set(payload, ptoks, v)
			}
			remove(payload, ptoks)
		}
		remove(live, toks)
	})
}
