package manifest

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestDecodeSources(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "single document",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			want: []string{"f.yaml:1 v1/ConfigMap a"},
		},
		{
			name: "line is where the content starts, after separators, blank lines and comments",
			in: "---\n# leading comment\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n" +
				"---\n\n# another\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n",
			want: []string{"f.yaml:4 v1/ConfigMap a", "f.yaml:11 v1/Secret b"},
		},
		{
			name: "empty, comment-only and null documents are skipped",
			in: "---\n---\n# only a comment\n---\n\n   \n---\n~\n---\nnull\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n" +
				"...\n---\n",
			want: []string{"f.yaml:12 v1/Namespace ns"},
		},
		{
			name: "separator followed by a comment",
			in:   "apiVersion: v1\nkind: A\nmetadata: {name: a}\n--- # next\napiVersion: v1\nkind: B\nmetadata: {name: b}\n",
			want: []string{"f.yaml:1 v1/A a", "f.yaml:5 v1/B b"},
		},
		{
			name: "document start marker on its own line is not required",
			in:   "apiVersion: v1\nkind: A\nmetadata: {name: a}",
			want: []string{"f.yaml:1 v1/A a"},
		},
		{
			name: "CRLF line endings and a byte order mark",
			in:   "\ufeffapiVersion: v1\r\nkind: A\r\nmetadata: {name: a}\r\n---\r\n\r\napiVersion: v1\r\nkind: B\r\nmetadata: {name: b}\r\n",
			want: []string{"f.yaml:1 v1/A a", "f.yaml:6 v1/B b"},
		},
		{
			name: "lone CR and Unicode line separators count as breaks for YAML but not for line numbers",
			in: "apiVersion: v1\rkind: A\rmetadata: {name: a}\r\n---\n\u2028\napiVersion: v1\r\rkind: List\nitems:\r" +
				"- {apiVersion: v1, kind: B, metadata: {name: b}}\n- {apiVersion: v1, kind: C, metadata: {name: c}}\n",
			want: []string{"f.yaml:1 v1/A a", "f.yaml:5 v1/B b", "f.yaml:6 v1/C c"},
		},
		{
			name: "generateName instead of name",
			in:   "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n",
			want: []string{"f.yaml:1 batch/v1/Job migrate-*"},
		},
		{
			name: "List is flattened with the line of every item",
			in: "apiVersion: v1\nkind: List\nitems:\n" +
				"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: one\n" +
				"# comment between items\n" +
				"- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: two\n",
			want: []string{"f.yaml:4 v1/ConfigMap one", "f.yaml:9 v1/Secret two"},
		},
		{
			name: "typed list items inherit kind and apiVersion",
			in: "---\napiVersion: v1\nkind: ConfigMapList\nitems:\n" +
				"  - metadata: {name: one}\n" +
				"  - metadata: {name: two}\n" +
				"  - apiVersion: v1\n    kind: Secret\n    metadata: {name: three}\n",
			want: []string{"f.yaml:5 v1/ConfigMap one", "f.yaml:6 v1/ConfigMap two", "f.yaml:7 v1/Secret three"},
		},
		{
			name: "flow-style items on one line share the line",
			in:   "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: A, metadata: {name: a}}, {apiVersion: v1, kind: B, metadata: {name: b}}]\n",
			want: []string{"f.yaml:3 v1/A a", "f.yaml:3 v1/B b"},
		},
		{
			name: "empty and null Lists produce nothing",
			in:   "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: PodList\nitems:\n",
			want: []string{},
		},
		{
			name: "a kind ending in List without items is an ordinary object",
			in:   "apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: a}\nspec: {}\n",
			want: []string{"f.yaml:1 example.com/v1/AllowList a"},
		},
		{
			name: "anchors, aliases and merge keys",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: &l {app: x}\n  annotations:\n    <<: *l\n    app: y\n" +
				"data:\n  copy: &c hello\n  again: *c\n",
			want: []string{"f.yaml:1 v1/ConfigMap a"},
		},
		{
			name: "merge keys may repeat and be overridden",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: &x {a: '1'}\ny: &y {b: '1'}\n" +
				"data:\n  <<: *x\n  <<: *y\n  a: '2'\n",
			want: []string{"f.yaml:1 v1/ConfigMap a"},
		},
		{
			name: "JSON stream",
			in: `{"apiVersion": "v1", "kind": "A", "metadata": {"name": "a"}}` + "\n\n" +
				"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"B\",\n  \"metadata\": {\"name\": \"b\"}\n}\n" +
				`{"apiVersion":"v1","kind":"C","metadata":{"name":"c"}}`,
			want: []string{"f.yaml:1 v1/A a", "f.yaml:3 v1/B b", "f.yaml:8 v1/C c"},
		},
		{
			name: "JSON List items",
			in: "\n{\n \"apiVersion\": \"v1\", \"kind\": \"ConfigMapList\",\n \"items\": [\n" +
				"  {\"metadata\": {\"name\": \"one\"}},\n\n" +
				"  {\n   \"metadata\": {\"name\": \"two\"}}\n ]\n}\n",
			want: []string{"f.yaml:5 v1/ConfigMap one", "f.yaml:7 v1/ConfigMap two"},
		},
		{
			name: "JSON object followed by YAML, as kubectl accepts",
			in:   `{"apiVersion": "v1", "kind": "A", "metadata": {"name": "a"}}` + "\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n",
			want: []string{"f.yaml:1 v1/A a", "f.yaml:3 v1/B b"},
		},
		{
			name: "YAML flow mapping that looks like JSON",
			in:   "{apiVersion: v1, kind: A, metadata: {name: a}}\n---\n{apiVersion: v1, kind: B,\n metadata: {name: b}}\n",
			want: []string{"f.yaml:1 v1/A a", "f.yaml:3 v1/B b"},
		},
		{
			name: "JSON documents inside a YAML stream",
			in:   "# comment first, so this is YAML\n{\"apiVersion\": \"v1\", \"kind\": \"A\", \"metadata\": {\"name\": \"a\"}}\n",
			want: []string{"f.yaml:2 v1/A a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := decodeString(tt.in, Options{})
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := describe(objs); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			for _, o := range objs {
				var fromRaw map[string]any
				if err := unmarshalJSON(o.Raw, &fromRaw); err != nil {
					t.Fatalf("%s: Raw is not JSON: %v", o.Source, err)
				}
				if !reflect.DeepEqual(fromRaw, o.Object.Object) {
					t.Errorf("%s: Raw %s does not match Object %v", o.Source, o.Raw, o.Object.Object)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n"
	tests := []struct {
		name     string
		in       string
		kind     error
		wantErrs []string
		wantObjs int
	}{
		{
			name:     "syntax error line is relative to the file",
			in:       ok + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   bad: indent\n---\n" + ok,
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:9: invalid YAML: mapping values are not allowed in this context"},
			wantObjs: 2,
		},
		{
			name:     "syntax error on the first line of a later document",
			in:       ok + "---\n[unclosed\n",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:5: invalid YAML: did not find expected ',' or ']'"},
			wantObjs: 1,
		},
		{
			name:     "syntax error after lone CRs",
			in:       "apiVersion: v1\rkind: A\r\rmetadata:\n  name: x\n   bad: indent\n",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:3: invalid YAML: mapping values are not allowed in this context"},
		},
		{
			name:     "a lone tag is an empty string to kubectl, not null",
			in:       "!\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{`f.yaml:1: document is a string (""), not a mapping`},
		},
		{
			name:     "three dashes without a blank after them are a scalar",
			in:       "---#x\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{`f.yaml:1: document is a string ("---#x"), not a mapping`},
		},
		{
			name:     "tab before a comment, rejected by kubectl's parser only",
			in:       ok + "---\n# fine\n\t# not fine\n",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:6: invalid YAML: found character that cannot start any token"},
			wantObjs: 1,
		},
		{
			name:     "unterminated quote at the end of a file without newline",
			in:       "a: \"",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:1: invalid YAML: found unexpected end of stream"},
		},
		{
			name:     "tab indentation",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:4: invalid YAML: found character that cannot start any token"},
		},
		{
			name:     "sequence document",
			in:       ok + "---\n- apiVersion: v1\n  kind: ConfigMap\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:5: document is a sequence, not a mapping"},
			wantObjs: 1,
		},
		{
			name:     "scalar document",
			in:       "just some text\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{`f.yaml:1: document is a string ("just some text"), not a mapping`},
		},
		{
			name:     "JSON array",
			in:       `{"apiVersion":"v1","kind":"A","metadata":{"name":"a"}}` + "\n[1, 2]\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:2: document is a sequence, not a mapping"},
			wantObjs: 1,
		},
		{
			name:     "missing apiVersion",
			in:       "kind: ConfigMap\nmetadata: {name: a}\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: missing apiVersion"},
		},
		{
			name:     "missing kind",
			in:       "\n\napiVersion: v1\nmetadata: {name: a}\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:3: missing kind"},
		},
		{
			name:     "empty kind",
			in:       "apiVersion: v1\nkind: ''\nmetadata: {name: a}\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: kind is empty"},
		},
		{
			name:     "apiVersion typed as a number",
			in:       "apiVersion: 1\nkind: A\nmetadata: {name: a}\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: apiVersion must be a string, found a number (1)"},
		},
		{
			name:     "missing metadata",
			in:       "apiVersion: v1\nkind: ConfigMap\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: ConfigMap is missing metadata.name"},
		},
		{
			name:     "missing name",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: ConfigMap is missing metadata.name (and has no metadata.generateName)"},
		},
		{
			name:     "name is not a string",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 42\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: ConfigMap: metadata.name must be a string, found a number (42)"},
		},
		{
			name:     "metadata is not a mapping",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: [a]\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: ConfigMap: metadata must be a mapping, found a sequence"},
		},
		{
			name: "bad List items report their own lines",
			in: "apiVersion: v1\nkind: List\nitems:\n" +
				"- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: good}\n" +
				"- apiVersion: v1\n  kind: ConfigMap\n" +
				"- 42\n" +
				"- metadata: {name: no-kind}\n",
			kind: ErrInvalidObject,
			wantErrs: []string{
				"f.yaml:7: List item 1: ConfigMap is missing metadata.name",
				"f.yaml:9: List item 2 is a number (42), not a mapping",
				"f.yaml:10: List item 3: missing apiVersion",
			},
			wantObjs: 1,
		},
		{
			name:     "List items that are not a sequence",
			in:       "apiVersion: v1\nkind: List\nitems: {a: b}\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: List: items is a mapping, not a sequence"},
		},
		{
			name:     "List without apiVersion",
			in:       "kind: List\nitems: []\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: missing apiVersion"},
		},
		{
			name:     "duplicate key",
			in:       ok + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
			kind:     ErrDuplicateKey,
			wantErrs: []string{`f.yaml:9: duplicate key "name" (first defined on line 8)`},
			wantObjs: 1,
		},
		{
			name:     "duplicate key, one quoted",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  '1': x\n  1: y\n",
			kind:     ErrDuplicateKey,
			wantErrs: []string{`f.yaml:6: duplicate key "1" (first defined on line 5)`},
		},
		{
			name:     "duplicate key in a large mapping",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, c: 10}\n",
			kind:     ErrDuplicateKey,
			wantErrs: []string{`f.yaml:4: duplicate key "c" (first defined on line 4)`},
		},
		{
			name:     "keys that only collide after YAML resolution",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  1: x\n  0x1: y\n",
			kind:     ErrDuplicateKey,
			wantErrs: []string{`f.yaml:6: duplicate key: key 1 already set in map`},
		},
		{
			name:     "duplicate key in JSON",
			in:       "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n \"metadata\": {\"name\": \"a\",\n  \"name\": \"b\"}}\n",
			kind:     ErrDuplicateKey,
			wantErrs: []string{`f.yaml:3: duplicate key "name" (first defined on line 2)`},
		},
		{
			name:     "invalid separator",
			in:       ok + "--- apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\n" + ok,
			kind:     ErrSyntax,
			wantErrs: []string{`f.yaml:4: invalid document separator "--- apiVersion: v1"`},
			wantObjs: 2,
		},
		{
			name:     "second document after an end marker without ---",
			in:       ok + "...\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:4: invalid YAML: did not find expected <document start>"},
		},
		{
			name:     "not representable as JSON",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: .nan\n",
			kind:     ErrInvalidObject,
			wantErrs: []string{"f.yaml:1: cannot convert document to JSON: json: unsupported value: NaN"},
		},
		{
			name:     "JSON syntax error after two good objects",
			in:       `{"apiVersion":"v1","kind":"A","metadata":{"name":"a"}}` + "\n" + `{"apiVersion":"v1","kind":"B","metadata":{"name":"b"}}` + "\n\n{\"a\": }\n",
			kind:     ErrSyntax,
			wantErrs: []string{"f.yaml:4: invalid JSON: invalid character '}' looking for beginning of value"},
			wantObjs: 2,
		},
		{
			name: "every bad document is reported",
			in:   "kind: A\nmetadata: {name: a}\n---\napiVersion: v1\n---\n" + ok + "---\n- x\n---\nfoo: [\n",
			wantErrs: []string{
				"f.yaml:1: missing apiVersion",
				"f.yaml:4: missing kind",
				"f.yaml:10: document is a sequence",
				"f.yaml:12: invalid YAML:",
			},
			wantObjs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := decodeString(tt.in, Options{})
			checkErrors(t, err, tt.kind, tt.wantErrs...)
			if len(objs) != tt.wantObjs {
				t.Errorf("got %d objects %q, want %d", len(objs), describe(objs), tt.wantObjs)
			}
		})
	}
}

func TestDecodeReturnsGoodObjectsWithErrors(t *testing.T) {
	in := "apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\nkind: B\n---\napiVersion: v1\nkind: C\nmetadata: {name: c}\n"
	objs, err := decodeString(in, Options{})
	if !errors.Is(err, ErrInvalidObject) {
		t.Fatalf("err = %v, want ErrInvalidObject", err)
	}
	want := []string{"f.yaml:1 v1/A a", "f.yaml:7 v1/C c"}
	if got := describe(objs); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDecodeReadError(t *testing.T) {
	_, err := Decode("broken", iotestErrReader{}, Options{})
	checkErrors(t, err, errBroken, "broken: cannot read: boom")
}

var errBroken = errors.New("boom")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errBroken }

func TestDecodeEmptyInput(t *testing.T) {
	for _, in := range []string{"", "\n\n", "# nothing\n", "---\n", "null\n", "  \n \n", "# tab\tin comment\n"} {
		objs, err := decodeString(in, Options{})
		if err != nil || len(objs) != 0 {
			t.Errorf("Decode(%q) = %d objects, %v; want nothing", in, len(objs), err)
		}
	}
}

func TestDecodeKeepsNameInSources(t *testing.T) {
	objs, err := Decode("dir/app.yaml", strings.NewReader("\napiVersion: v1\nkind: A\nmetadata: {name: a}\n"), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].Source; got != (Source{File: "dir/app.yaml", Line: 2}) {
		t.Errorf("Source = %#v", got)
	}
}
