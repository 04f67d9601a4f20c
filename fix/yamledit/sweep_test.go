package yamledit

import (
	"errors"
	"testing"
)

// sweepDocs are realistic documents; TestSweep edits every node in them.
var sweepDocs = []string{
	lines(
		"# The web tier.",
		"apiVersion: apps/v1",
		"kind: Deployment",
		"metadata:",
		"  name: web   # the name",
		"  labels: {app: web, \"tier\": 'fe'}",
		"  annotations:",
		"",
		"spec:",
		"  replicas: 3",
		"  selector:",
		"    matchLabels:",
		"      app: web",
		"  template:",
		"    metadata:",
		"      labels:",
		"        app: web",
		"    spec:",
		"      containers:",
		"      - name: nginx",
		"        image: \"nginx:1.25\"  # pinned",
		"        args: [\"--a\", \"--b\"]",
		"        command:",
		"          - /bin/sh",
		"          - -c",
		"          - |",
		"            echo hello",
		"            exec nginx",
		"        env:",
		"          # proxy settings",
		"          - name: A",
		"            value: >-",
		"              folded",
		"              text",
		"          -",
		"            name: B",
		"            value: 'x'",
		"        ports: []",
		"      - name: sidecar",
		"        image: envoy",
		"        resources: {}",
		"      volumes:",
		"      - name: data",
		"        emptyDir: {}",
		"---",
		"apiVersion: v1",
		"kind: ConfigMap",
		"metadata: {name: cm, namespace: default}",
		"data:",
		"  key: value",
		"  multi: this is",
		"    a folded plain",
		"  quoted: \"a",
		"    b\"",
		"  empty:",
		"  list:",
		"  - - a",
		"    - b",
		"  - c",
	),
	"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Service\",\n  \"spec\": {\n    \"ports\": [\n      {\"port\": 80, \"name\": \"http\"},\n      {\"port\": 443}\n    ],\n    \"selector\": {}\n  }\n}",
	"a:\r\n  b: 1\r\n  c:\r\n  - x\r\n  - yy: 2\r\n    z: 3\r\n",
}

// pointers returns every pointer in v.
func pointers(v any, prefix []string, out *[][]string) {
	*out = append(*out, prefix)
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			pointers(x[k], subToks(prefix, k), out)
		}
	case []any:
		for i := range x {
			pointers(x[i], subToks(prefix, itoa(i)), out)
		}
	}
}

func TestSweep(t *testing.T) {
	values := []any{
		"registry.internal/nginx:1.27", int64(7), "true", nil, "two\nlines\n",
		map[string]any{"k": "v", "n": map[string]any{"x": []any{"1", int64(2)}}},
		[]any{"a", map[string]any{"b": "c"}}, map[string]any{}, []any{},
	}
	for di, src := range sweepDocs {
		f0, err := Parse("sweep.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		for doc := 0; doc < f0.Documents(); doc++ {
			data, err := kubectlView(f0.data[f0.docs[doc].start:f0.docs[doc].end])
			if err != nil {
				t.Fatal(err)
			}
			var ptrs [][]string
			pointers(data, nil, &ptrs)
			for _, toks := range ptrs {
				p := formatPointer(toks)
				try := func(what string, edit func(f *File) error, want func(any) (any, error)) {
					f, _ := Parse("sweep.yaml", []byte(src))
					err := edit(f)
					if err != nil {
						if errors.Is(err, ErrUnsupported) {
							t.Errorf("doc %d.%d %s %s: %v\n%s", di, doc, what, p, err, f.Bytes())
						}
						return
					}
					before, _ := kubectlView(f0.data[f0.docs[doc].start:f0.docs[doc].end])
					w, err := want(before)
					if err != nil {
						t.Errorf("doc %d.%d %s %s succeeded but should fail: %v", di, doc, what, p, err)
						return
					}
					checkEdit(t, f0, f.Bytes(), doc, w)
				}
				for _, v := range values {
					try("set", func(f *File) error { return f.Set(doc, p, v) },
						func(d any) (any, error) { return dataSet(d, toks, v) })
					try("set new", func(f *File) error { return f.Set(doc, p+"/new~1key", v) },
						func(d any) (any, error) { return dataSet(d, subToks(toks, "new/key"), v) })
					try("append", func(f *File) error { return f.Set(doc, p+"/-", v) },
						func(d any) (any, error) { return dataSet(d, subToks(toks, "-"), v) })
				}
				if len(toks) > 0 {
					try("remove", func(f *File) error { return f.Remove(doc, p) },
						func(d any) (any, error) { return dataRemove(d, toks) })
				}
			}
		}
	}
}
