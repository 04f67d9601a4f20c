package manifest

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzDecode(f *testing.F) {
	seeds := []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: yes\n",
		"---\n# c\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\napiVersion: v1\nkind: B\nmetadata: {generateName: b-}\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: A\n  metadata: {name: a}\n- {kind: B}\n",
		"apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata: {name: a}\n",
		`{"apiVersion":"v1","kind":"A","metadata":{"name":"a"}}` + "\n" + `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"p"}}]}`,
		`{"apiVersion":"v1","kind":"A","metadata":{"name":"a"}}` + "\n---\napiVersion: v1\nkind: B\nmetadata: {name: b}\n",
		"{apiVersion: v1, kind: A, metadata: {name: a}}",
		"apiVersion: v1\nkind: A\nmetadata: &m {name: a}\nx: *m\ny:\n  <<: *m\n  name: b\n",
		"a: &a [*a]\n",
		billionLaughs,
		"apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  name: b\n",
		"apiVersion: v1\nkind: A\nmetadata: {name: a}\n1: x\n0x1: y\n",
		"--- foo\n",
		"a: 1\n...\nb: 2\n",
		"apiVersion: v1\rkind: A\rmetadata: {name: a}\r\n",
		"- a\n- b\n",
		"\ufeff{\"a\": [1, 2, {\"b\": null}]}",
		"apiVersion: v1\nkind: A\nmetadata: {name: a}\nx: .nan\n",
		"%YAML 1.1\n---\napiVersion: v1\nkind: A\nmetadata: {name: a}\n",
		"apiVersion: !!binary aGVsbG8=\nkind: A\n",
		"? [a, b]\n: c\n",
		"",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Small limits keep individual inputs fast and exercise the
		// limit paths.
		opts := Options{MaxDepth: 20, MaxAliasNodes: 2000, MaxDocuments: 100}
		objs, err := Decode("fuzz.yaml", bytes.NewReader(data), opts)
		if errors.Is(err, ErrInternal) {
			t.Fatalf("decoder panicked: %v", err)
		}
		maxLine := bytes.Count(data, []byte("\n")) + 1
		for _, e := range flatten(err) {
			var me *Error
			if !errors.As(e, &me) {
				t.Fatalf("error %v is a %T, not an *Error", e, e)
			}
			if me.Source.File != "fuzz.yaml" || me.Source.Line < 0 || me.Source.Line > maxLine {
				t.Fatalf("error has bad source %#v: %v", me.Source, e)
			}
		}
		for _, o := range objs {
			u := o.Object
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				t.Fatalf("%s: object without apiVersion or kind: %v", o.Source, u.Object)
			}
			if u.GetName() == "" && u.GetGenerateName() == "" {
				t.Fatalf("%s: object without name: %v", o.Source, u.Object)
			}
			if o.Source.File != "fuzz.yaml" || o.Source.Line < 1 || o.Source.Line > maxLine {
				t.Fatalf("bad source %#v (input has %d lines)", o.Source, maxLine)
			}
			var fromRaw map[string]any
			if err := unmarshalJSON(o.Raw, &fromRaw); err != nil || !reflect.DeepEqual(fromRaw, u.Object) {
				t.Fatalf("%s: Raw %q does not round-trip to %v: %v", o.Source, o.Raw, u.Object, err)
			}
		}
		if err == nil {
			compareWithKubectl(t, data, objs)
		}
	})
}

// compareWithKubectl checks that input we accept entirely decodes to the
// same objects with kubectl's decoder. Lists are skipped since kubectl
// flattens them later, in its resource builder.
func compareWithKubectl(t *testing.T, data []byte, objs []Object) {
	want, err := kubectlDecode(data)
	if err != nil {
		t.Fatalf("we accept the input but kubectl's decoder fails: %v", err)
	}
	for _, m := range want {
		kind, _ := m["kind"].(string)
		if _, ok := m["items"]; ok && strings.HasSuffix(kind, "List") {
			return
		}
	}
	if len(want) != len(objs) {
		t.Fatalf("got %d objects, kubectl %d", len(objs), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(objs[i].Object.Object, want[i]) {
			t.Fatalf("object %d differs:\n got     %#v\n kubectl %#v", i, objs[i].Object.Object, want[i])
		}
	}
}
