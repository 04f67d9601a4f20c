package yamledit

import (
	"errors"
	"strings"
	"testing"
)

// op is one edit in a test case.
type op struct {
	remove bool
	doc    int
	ptr    string
	value  any
}

func set(ptr string, v any) op            { return op{ptr: ptr, value: v} }
func setIn(doc int, ptr string, v any) op { return op{doc: doc, ptr: ptr, value: v} }
func del(ptr string) op                   { return op{remove: true, ptr: ptr} }

func run(f *File, o op) error {
	if o.remove {
		return f.Remove(o.doc, o.ptr)
	}
	return f.Set(o.doc, o.ptr, o.value)
}

// lines joins lines with "\n" and ends with one, to keep expected outputs
// readable.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

var editCases = []struct {
	name string
	in   string
	ops  []op
	want string
	err  error // the kind of error of the last op; want is then ignored
}{
	{
		name: "image in multi-document file",
		in: lines(
			"# The web tier.",
			"apiVersion: apps/v1",
			"kind: Deployment",
			"metadata:",
			"  name: web",
			"spec:",
			"  template:",
			"    spec:",
			"      containers:",
			"        - name: nginx",
			"          image: nginx:1.27 # upstream",
			"---",
			"# comment between documents",
			"apiVersion: apps/v1",
			"kind: Deployment",
			"metadata:",
			"  name: batch",
			"spec:",
			"  template:",
			"    spec:",
			"      containers:",
			"        - name: nginx",
			"          image: nginx:1.27",
		),
		ops: []op{setIn(1, "/spec/template/spec/containers/0/image", "registry.internal/nginx:1.27")},
		want: lines(
			"# The web tier.",
			"apiVersion: apps/v1",
			"kind: Deployment",
			"metadata:",
			"  name: web",
			"spec:",
			"  template:",
			"    spec:",
			"      containers:",
			"        - name: nginx",
			"          image: nginx:1.27 # upstream",
			"---",
			"# comment between documents",
			"apiVersion: apps/v1",
			"kind: Deployment",
			"metadata:",
			"  name: batch",
			"spec:",
			"  template:",
			"    spec:",
			"      containers:",
			"        - name: nginx",
			"          image: registry.internal/nginx:1.27",
		),
	},
	{
		name: "comment beside the value stays, spacing kept",
		in:   lines("spec:", "  replicas:    3    # HPA owns this", "  paused: false"),
		ops:  []op{set("/spec/replicas", 5)},
		want: lines("spec:", "  replicas:    5    # HPA owns this", "  paused: false"),
	},
	{
		name: "double-quoted stays double-quoted",
		in:   lines(`image: "nginx:1.25" # pinned`),
		ops:  []op{set("/image", "registry.internal/nginx:1.27")},
		want: lines(`image: "registry.internal/nginx:1.27" # pinned`),
	},
	{
		name: "single-quoted stays single-quoted",
		in:   lines(`image: 'nginx:1.25'`),
		ops:  []op{set("/image", "it's:2")},
		want: lines(`image: 'it''s:2'`),
	},
	{
		name: "plain becomes quoted when needed",
		in:   lines("a: x", "b: x", "c: x", "d: x", "e: x", "f: x"),
		ops: []op{
			set("/a", "true"), set("/b", "1.0"), set("/c", "yes"),
			set("/d", "a: b"), set("/e", "2024-01-02"), set("/f", ""),
		},
		want: lines(`a: "true"`, `b: "1.0"`, `c: "yes"`, `d: "a: b"`, `e: "2024-01-02"`, `f: ""`),
	},
	{
		name: "quoted string becomes a number",
		in:   lines(`replicas: "3"`),
		ops:  []op{set("/replicas", int64(4))},
		want: lines(`replicas: 4`),
	},
	{
		name: "bool, null and float",
		in:   lines("a: 1", "b: 1", "c: 1"),
		ops:  []op{set("/a", true), set("/b", nil), set("/c", 0.5)},
		want: lines("a: true", "b: null", "c: 0.5"),
	},
	{
		name: "no-op keeps text",
		in:   lines("a: 0x10   # hex", "b: '3'"),
		ops:  []op{set("/a", 16), set("/b", "3")},
		want: lines("a: 0x10   # hex", "b: '3'"),
	},
	{
		name: "literal block scalar kept literal",
		in:   lines("data:", "  script: |", "    echo hello", "    exit 0", "  other: 1"),
		ops:  []op{set("/data/script", "echo bye\nexit 1\n")},
		want: lines("data:", "  script: |", "    echo bye", "    exit 1", "  other: 1"),
	},
	{
		name: "literal block scalar keeps header comment, strip chomping",
		in:   lines("data:", "  script: |  # the script", "      echo hello", "  other: 1"),
		ops:  []op{set("/data/script", "a\nb")},
		want: lines("data:", "  script: |-  # the script", "      a", "      b", "  other: 1"),
	},
	{
		name: "folded scalar replaced by one line",
		in:   lines("description: >", "  a long", "  text", "next: 1"),
		ops:  []op{set("/description", "short")},
		want: lines("description: >-", "  short", "next: 1"),
	},
	{
		name: "block scalar replaced by a plain scalar",
		in:   lines("a: |", "  x", "  y", "b: 2"),
		ops:  []op{set("/a", 7)},
		want: lines("a: 7", "b: 2"),
	},
	{
		name: "plain scalar becomes a literal block",
		in:   lines("config:", "  a: old # note", "  b: 2"),
		ops:  []op{set("/config/a", "line 1\nline 2\n")},
		want: lines("config:", "  a: | # note", "    line 1", "    line 2", "  b: 2"),
	},
	{
		name: "multi-line plain scalar",
		in:   lines("a: this is", "  folded text", "b: 1"),
		ops:  []op{set("/a", "x")},
		want: lines("a: x", "b: 1"),
	},
	{
		name: "multi-line double-quoted scalar",
		in:   lines(`a: "this is`, `  folded"  # c`, "b: 1"),
		ops:  []op{set("/a", "x")},
		want: lines(`a: "x"  # c`, "b: 1"),
	},
	{
		name: "list not indented under its key",
		in: lines(
			"containers:",
			"- name: a",
			"  image: a:1",
			"- name: b",
			"  image: b:1",
		),
		ops: []op{set("/containers/1/image", "b:2"), set("/containers/-", map[string]any{"name": "c", "image": "c:1"})},
		want: lines(
			"containers:",
			"- name: a",
			"  image: a:1",
			"- name: b",
			"  image: b:2",
			"- image: c:1",
			"  name: c",
		),
	},
	{
		name: "list indented under its key",
		in: lines(
			"containers:",
			"  - name: a",
			"    image: a:1",
			"",
			"volumes: []",
		),
		ops: []op{set("/containers/-", map[string]any{"name": "c", "env": []any{map[string]any{"name": "X", "value": "1"}}})},
		want: lines(
			"containers:",
			"  - name: a",
			"    image: a:1",
			"  - env:",
			"      - name: X",
			`        value: "1"`,
			"    name: c",
			"",
			"volumes: []",
		),
	},
	{
		name: "list with wide gap after dash",
		in:   lines("items:", "  -   name: a", "      x: 1"),
		ops:  []op{set("/items/-", map[string]any{"name": "b"})},
		want: lines("items:", "  -   name: a", "      x: 1", "  -   name: b"),
	},
	{
		name: "flow map gets a key",
		in:   lines("metadata:", "  labels: {app: web}  # selector", "  name: web"),
		ops:  []op{set("/metadata/labels/tier", "frontend")},
		want: lines("metadata:", "  labels: {app: web, tier: frontend}  # selector", "  name: web"),
	},
	{
		name: "flow map value replaced",
		in:   lines("labels: {app: web, tier: fe}"),
		ops:  []op{set("/labels/app", "api")},
		want: lines("labels: {app: api, tier: fe}"),
	},
	{
		name: "flow map entry removed",
		in:   lines("labels: {app: web, tier: fe, x: y}"),
		ops:  []op{del("/labels/tier"), del("/labels/x")},
		want: lines("labels: {app: web}"),
	},
	{
		name: "empty flow map becomes block",
		in:   lines("metadata:", "  annotations: {}", "  name: x"),
		ops:  []op{set("/metadata/annotations/a", "b")},
		want: lines("metadata:", "  annotations:", "    a: b", "  name: x"),
	},
	{
		name: "missing annotations map is created",
		in: lines(
			"apiVersion: v1",
			"kind: ConfigMap",
			"metadata:",
			"  name: cm",
			"  labels:",
			"    app: web",
			"",
			"# the data",
			"data:",
			"  k: v",
		),
		ops: []op{set("/metadata/annotations/argocd.argoproj.io~1compare-options", "IgnoreExtraneous")},
		want: lines(
			"apiVersion: v1",
			"kind: ConfigMap",
			"metadata:",
			"  name: cm",
			"  labels:",
			"    app: web",
			"  annotations:",
			"    argocd.argoproj.io/compare-options: IgnoreExtraneous",
			"",
			"# the data",
			"data:",
			"  k: v",
		),
	},
	{
		name: "null annotations filled in",
		in:   lines("metadata:", "  annotations:", "  name: x"),
		ops:  []op{set("/metadata/annotations/a", "b")},
		want: lines("metadata:", "  annotations:", "    a: b", "  name: x"),
	},
	{
		name: "null with comment filled in",
		in:   lines("metadata:", "  annotations: ~ # none yet", "  name: x"),
		ops:  []op{set("/metadata/annotations/a", "b")},
		want: lines("metadata:", "  annotations: # none yet", "    a: b", "  name: x"),
	},
	{
		name: "deep missing path at end of file without newline",
		in:   "kind: Application\nspec:\n  project: default",
		ops:  []op{set("/spec/syncPolicy/syncOptions/-", "ServerSideApply=true")},
		want: "kind: Application\nspec:\n  project: default\n  syncPolicy:\n    syncOptions:\n      - ServerSideApply=true",
	},
	{
		name: "append to syncOptions",
		in: lines(
			"spec:",
			"  syncPolicy:",
			"    automated:",
			"      selfHeal: true",
			"    syncOptions:",
			"    - CreateNamespace=true # keep",
			"  destination: {}",
		),
		ops: []op{set("/spec/syncPolicy/syncOptions/-", "RespectIgnoreDifferences=true")},
		want: lines(
			"spec:",
			"  syncPolicy:",
			"    automated:",
			"      selfHeal: true",
			"    syncOptions:",
			"    - CreateNamespace=true # keep",
			"    - RespectIgnoreDifferences=true",
			"  destination: {}",
		),
	},
	{
		name: "append to quoted flow list keeps quotes",
		in:   lines(`syncOptions: ["CreateNamespace=true"]`),
		ops:  []op{set("/syncOptions/-", "ServerSideApply=true")},
		want: lines(`syncOptions: ["CreateNamespace=true", "ServerSideApply=true"]`),
	},
	{
		name: "append to empty flow list",
		in:   lines("spec:", "  ignoreDifferences: []", "  x: 1"),
		ops:  []op{set("/spec/ignoreDifferences/-", map[string]any{"kind": "Deployment", "jsonPointers": []any{"/spec/replicas"}})},
		want: lines("spec:", "  ignoreDifferences:", "    - jsonPointers:", "        - /spec/replicas", "      kind: Deployment", "  x: 1"),
	},
	{
		name: "remove a key",
		in: lines(
			"spec:",
			"  # replicas are set by the HPA",
			"  replicas: 3 # drop me",
			"  selector:",
			"    matchLabels:",
			"      app: web",
		),
		ops: []op{del("/spec/replicas")},
		want: lines(
			"spec:",
			"  # replicas are set by the HPA",
			"  selector:",
			"    matchLabels:",
			"      app: web",
		),
	},
	{
		name: "remove a key with a nested value",
		in:   lines("a:", "  b:", "    c: 1", "    # inner", "    d: |", "      text", "e: 2"),
		ops:  []op{del("/a/b")},
		want: lines("a: {}", "e: 2"),
	},
	{
		name: "remove the last key of the file without newline",
		in:   "a: 1\nb: 2",
		ops:  []op{del("/b")},
		want: "a: 1",
	},
	{
		name: "remove a list item",
		in:   lines("args:", "- --a", "- --b  # second", "- --c"),
		ops:  []op{del("/args/1")},
		want: lines("args:", "- --a", "- --c"),
	},
	{
		name: "remove the only list item",
		in:   lines("args:", "  - --a", "b: 1"),
		ops:  []op{del("/args/0")},
		want: lines("args: []", "b: 1"),
	},
	{
		name: "remove first key of a mapping in a list",
		in:   lines("- name: a", "  image: x", "- name: b"),
		ops:  []op{del("/0/name")},
		want: lines("- image: x", "- name: b"),
	},
	{
		name: "CRLF line endings",
		in:   "metadata:\r\n  name: web\r\nspec:\r\n  replicas: 1\r\n",
		ops:  []op{set("/spec/replicas", 2), set("/metadata/labels", map[string]any{"app": "web"}), del("/metadata/name")},
		want: "metadata:\r\n  labels:\r\n    app: web\r\nspec:\r\n  replicas: 2\r\n",
	},
	{
		name: "CRLF literal block",
		in:   "a: |\r\n  x\r\nb: 1\r\n",
		ops:  []op{set("/a", "y\nz\n")},
		want: "a: |\r\n  y\r\n  z\r\nb: 1\r\n",
	},
	{
		name: "document starting with --- and a comment",
		in:   lines("--- # first", "a: 1", "--- # second", "a: 2"),
		ops:  []op{setIn(1, "/b", 3)},
		want: lines("--- # first", "a: 1", "--- # second", "a: 2", "b: 3"),
	},
	{
		name: "leading empty document and trailing separator",
		in:   lines("---", "---", "a: 1", "---"),
		ops:  []op{set("/a", 2)},
		want: lines("---", "---", "a: 2", "---"),
	},
	{
		name: "four-space indentation is learned",
		in:   lines("metadata:", "    name: x", "spec:", "    containers:", "        -   name: a"),
		ops:  []op{set("/metadata/labels/app", "x")},
		want: lines("metadata:", "    name: x", "    labels:", "        app: x", "spec:", "    containers:", "        -   name: a"),
	},
	{
		name: "new list under a key uses the document's list indentation",
		in:   lines("a:", "- x", "b:", "  c: 1"),
		ops:  []op{set("/b/d", []any{"y"})},
		want: lines("a:", "- x", "b:", "  c: 1", "  d:", "  - \"y\""),
	},
	{
		name: "merge a map keeps untouched entries",
		in:   lines("labels:", "  app: web # main", "  old: x", "  tier: fe"),
		ops:  []op{set("/labels", map[string]any{"app": "web", "tier": "be", "new": "n"})},
		want: lines("labels:", "  app: web # main", "  tier: be", `  new: "n"`),
	},
	{
		name: "scalar replaced by a map",
		in:   lines("a: x # c", "b: 1"),
		ops:  []op{set("/a", map[string]any{"k": "v"})},
		want: lines("a: # c", "  k: v", "b: 1"),
	},
	{
		name: "map replaced by a scalar",
		in:   lines("a: # c", "  k: v", "  j: w", "b: 1"),
		ops:  []op{set("/a", "s")},
		want: lines("a: s # c", "b: 1"),
	},
	{
		name: "scalar list item replaced by a map",
		in:   lines("- x", "- y"),
		ops:  []op{set("/0", map[string]any{"a": 1, "b": 2})},
		want: lines("- a: 1", "  b: 2", "- y"),
	},
	{
		name: "empty list items filled in",
		in:   lines("a:", "-", "- # nothing", "- x"),
		ops:  []op{set("/a/0", map[string]any{"k": "v", "l": "w"}), set("/a/1", "y"), set("/a/2", []any{"p", "q"})},
		want: lines("a:", "- k: v", "  l: w", "- \"y\" # nothing", "- - p", "  - q"),
	},
	{
		name: "empty flow document stays flow",
		in:   "{}\n",
		ops:  []op{set("", map[string]any{"kind": "List", "items": []any{}})},
		want: "{items: [], kind: List}\n",
	},
	{
		name: "JSON file",
		in:   "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"data\": {\"a\": \"1\"}\n}\n",
		ops:  []op{set("/data/b", "2"), set("/metadata", map[string]any{"name": "x"})},
		want: "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"data\": {\"a\": \"1\", \"b\": \"2\"},\n  \"metadata\": {\"name\": \"x\"}\n}\n",
	},
	{
		name: "keys that need quoting",
		in:   lines("data:", "  a: 1"),
		ops:  []op{set("/data/true", "x"), set("/data/with space: colon", "y"), set("/data/08", "z")},
		want: lines("data:", "  a: 1", `  "true": x`, `  "with space: colon": "y"`, `  "08": "z"`),
	},
	{
		name: "new value copies sibling quoting",
		in:   lines("annotations:", `  a: "x"`),
		ops:  []op{set("/annotations/b", "y")},
		want: lines("annotations:", `  a: "x"`, `  b: "y"`),
	},
	{
		name: "nested list inside list",
		in:   lines("- - a", "  - b"),
		ops:  []op{set("/0/-", "c"), del("/0/0")},
		want: lines("- - b", "  - c"),
	},
	{
		name: "byte order mark kept",
		in:   "\ufeffa: 1\n",
		ops:  []op{set("/a", 2)},
		want: "\ufeffa: 2\n",
	},
	{
		name: "unicode before the value",
		in:   lines("ключ: значение # комментарий", "b: 1"),
		ops:  []op{set("/ключ", "новое")},
		want: lines("ключ: новое # комментарий", "b: 1"),
	},
	{
		name: "tagged scalar",
		in:   lines("a: !!str 12", "b: 1"),
		ops:  []op{set("/a", "13")},
		want: lines(`a: "13"`, "b: 1"),
	},
	{
		name: "explicit document end",
		in:   lines("a: 1", "..."),
		ops:  []op{set("/b", 2)},
		want: lines("a: 1", "b: 2", "..."),
	},
	{
		name: "list replaced by a map moves its last comment up",
		in:   lines("a:", "  - x", "  - y  # last", "b: 1"),
		ops:  []op{set("/a", map[string]any{"s": "line 1\nline 2\n"})},
		want: lines("a:", "  s: | # last", "    line 1", "    line 2", "b: 1"),
	},
	{
		name: "block scalar at the end of a file without newline, key added after it",
		in:   "a: |\n  x",
		ops:  []op{set("/b", 1)},
		want: "a: |-\n  x\nb: 1",
	},
	{
		name: "block scalar written at the end of a file without newline",
		in:   "a: 1\nb: 2",
		ops:  []op{set("/b", "x\ny\n")},
		want: "a: 1\nb: \"x\\ny\\n\"",
	},
	{
		name: "remove after a block scalar at the end of a file without newline",
		in:   "a: |\n  x\nb: 2",
		ops:  []op{del("/b")},
		want: "a: |\n  x\n",
	},
	{
		name: "index out of range",
		in:   lines("a: [1]"),
		ops:  []op{set("/a/1", 2)},
		err:  ErrInvalid,
	},
	{
		name: "set below a scalar",
		in:   lines("a: 1"),
		ops:  []op{set("/a/b", 2)},
		err:  ErrInvalid,
	},
	{
		name: "remove missing",
		in:   lines("a: 1"),
		ops:  []op{del("/b")},
		err:  ErrNotFound,
	},
	{
		name: "alias refused",
		in:   lines("a: &x 1", "b: *x"),
		ops:  []op{set("/c", 1)},
		err:  ErrUnsupported,
	},
	{
		name: "merge key refused",
		in:   lines("base: {a: 1}", "c:", "  <<: {b: 2}"),
		ops:  []op{set("/c/d", 1)},
		err:  ErrUnsupported,
	},
	{
		name: "key read differently by kubectl refused",
		in:   lines("a: 1", "on: push"),
		ops:  []op{set("/b", 1)},
		err:  ErrUnsupported,
	},
	{
		name: "quoted ambiguous key is fine",
		in:   lines("a: 1", "'on': push"),
		ops:  []op{set("/on", "pull")},
		want: lines("a: 1", "'on': pull"),
	},
	{
		name: "duplicate keys refused",
		in:   lines("a: 1", "a: 2"),
		ops:  []op{set("/b", 1)},
		err:  ErrUnsupported,
	},
	{
		name: "bad pointer",
		in:   lines("a: 1"),
		ops:  []op{set("a", 1)},
		err:  ErrInvalid,
	},
	{
		name: "bad value",
		in:   lines("a: 1"),
		ops:  []op{set("/a", struct{}{})},
		err:  ErrInvalid,
	},
	{
		name: "no such document",
		in:   lines("a: 1"),
		ops:  []op{setIn(1, "/a", 1)},
		err:  ErrNotFound,
	},
}

func TestEdit(t *testing.T) {
	for _, tc := range editCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("test.yaml", []byte(tc.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for i, o := range tc.ops {
				err := run(f, o)
				if i == len(tc.ops)-1 && tc.err != nil {
					if !errors.Is(err, tc.err) {
						t.Fatalf("op %d: got error %v, want %v", i, err, tc.err)
					}
					if string(f.Bytes()) != tc.in {
						t.Fatalf("failed edit changed the file:\n%s", f.Bytes())
					}
					return
				}
				if err != nil {
					t.Fatalf("op %d (%s): %v", i, o.ptr, err)
				}
			}
			if got := string(f.Bytes()); got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s\ndiff:\n%s", got, tc.want, unifiedDiff("x", []byte(tc.want), []byte(got)))
			}
			if f.Changed() != (tc.want != tc.in) {
				t.Errorf("Changed() = %v", f.Changed())
			}
		})
	}
}
