package appset

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func newExpander(t *testing.T, goTemplate bool) *expander {
	t.Helper()
	e, err := newEngine(context.Background(), goTemplate, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &expander{engine: e, opts: Options{MaxApplications: 100, MaxEntries: 1000, MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20}}
}

// Rows of Argo CD's Test_generateParamsFromGitFile.
func TestParamsFromFile(t *testing.T) {
	foo := []byte("\nfoo:\n  bar: baz\n")
	goPath := map[string]any{"path": "path/dir", "basename": "dir", "filename": "file_name.yaml",
		"basenameNormalized": "dir", "filenameNormalized": "file-name.yaml", "segments": []string{"path", "dir"}}
	for _, tc := range []struct {
		name       string
		content    []byte
		values     map[string]string
		goTemplate bool
		prefix     string
		want       []map[string]any
		wantErr    bool
	}{
		{name: "empty file returns path parameters", content: []byte(""), want: []map[string]any{{
			"path": "path/dir", "path.basename": "dir", "path.filename": "file_name.yaml", "path.basenameNormalized": "dir",
			"path.filenameNormalized": "file-name.yaml", "path[0]": "path", "path[1]": "dir"}}},
		{name: "invalid json/yaml file returns error", content: []byte("this is not json or yaml"), wantErr: true},
		{name: "file parameters are added to params", content: foo, want: []map[string]any{{
			"foo.bar": "baz", "path": "path/dir", "path.basename": "dir", "path.filename": "file_name.yaml", "path.basenameNormalized": "dir",
			"path.filenameNormalized": "file-name.yaml", "path[0]": "path", "path[1]": "dir"}}},
		{name: "path parameter are prefixed", content: foo, prefix: "myRepo", want: []map[string]any{{
			"foo.bar": "baz", "myRepo.path": "path/dir", "myRepo.path.basename": "dir", "myRepo.path.filename": "file_name.yaml",
			"myRepo.path.basenameNormalized": "dir", "myRepo.path.filenameNormalized": "file-name.yaml", "myRepo.path[0]": "path", "myRepo.path[1]": "dir"}}},
		{name: "file parameters are added to params with go template", content: foo, goTemplate: true,
			values: map[string]string{"somekey": "{{.path.basename}}"},
			want:   []map[string]any{{"values": map[string]string{"somekey": "dir"}, "foo": map[string]any{"bar": "baz"}, "path": goPath}}},
		{name: "path parameter are prefixed with go template", content: foo, goTemplate: true, prefix: "myRepo",
			want: []map[string]any{{"foo": map[string]any{"bar": "baz"}, "myRepo": map[string]any{"path": goPath}}}},
		{name: "path parameter are prefixed with go template and values", content: foo, goTemplate: true, prefix: "myRepo",
			values: map[string]string{"somekey": "{{.myRepo.path.basename}}"},
			want:   []map[string]any{{"foo": map[string]any{"bar": "baz"}, "myRepo": map[string]any{"path": goPath}, "values": map[string]string{"somekey": "dir"}}}},
		// Beyond Argo CD's rows: a list of objects, numbers as JSON
		// reads them, lists flattened by index, and YAML 1.1 as
		// sigs.k8s.io/yaml reads it: y is true, the key n false.
		{name: "list of objects", content: []byte("- {a: x}\n- {a: y, n: 1000000, l: [p, q], e: {}}\n"), want: []map[string]any{
			{"a": "x", "path": "path/dir", "path.basename": "dir", "path.filename": "file_name.yaml", "path.basenameNormalized": "dir",
				"path.filenameNormalized": "file-name.yaml", "path[0]": "path", "path[1]": "dir"},
			{"a": "true", "false": "1e+06", "l.0": "p", "l.1": "q", "path": "path/dir", "path.basename": "dir", "path.filename": "file_name.yaml", "path.basenameNormalized": "dir",
				"path.filenameNormalized": "file-name.yaml", "path[0]": "path", "path[1]": "dir"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExpander(t, tc.goTemplate)
			got, err := x.paramsFromFile("path/dir/file_name.yaml", tc.content, gitGenerator{Values: tc.values, PathParamPrefix: tc.prefix})
			if tc.wantErr {
				if err == nil {
					t.Errorf("no error; got %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n %#v\nwant\n %#v", got, tc.want)
			}
		})
	}
}

// Rows of Argo CD's TestGitGenerateParamsFromDirectories (the
// repository's directories given as its repo-server mock gives them).
func TestDirectoryParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		items  []gitItem
		prefix string
		dirs   []string
		values map[string]string
		want   []map[string]any
	}{
		{name: "happy flow - created apps", items: []gitItem{{Path: "*"}}, dirs: []string{"app1", "app2", "app_3", "p1/app4"}, want: []map[string]any{
			{"path": "app1", "path.basename": "app1", "path.basenameNormalized": "app1", "path[0]": "app1"},
			{"path": "app2", "path.basename": "app2", "path.basenameNormalized": "app2", "path[0]": "app2"},
			{"path": "app_3", "path.basename": "app_3", "path.basenameNormalized": "app-3", "path[0]": "app_3"}}},
		{name: "It prefixes path parameters with PathParamPrefix", items: []gitItem{{Path: "*"}}, prefix: "myRepo", dirs: []string{"app1", "p1/app4"}, want: []map[string]any{
			{"myRepo.path": "app1", "myRepo.path.basename": "app1", "myRepo.path.basenameNormalized": "app1", "myRepo.path[0]": "app1"}}},
		{name: "It filters application according to the paths", items: []gitItem{{Path: "p1/*"}, {Path: "p1/*/*"}},
			dirs: []string{"app1", "p1/app2", "p1/p2/app3", "p1/p2/p3/app4"}, want: []map[string]any{
				{"path": "p1/app2", "path.basename": "app2", "path[0]": "p1", "path[1]": "app2", "path.basenameNormalized": "app2"},
				{"path": "p1/p2/app3", "path.basename": "app3", "path[0]": "p1", "path[1]": "p2", "path[2]": "app3", "path.basenameNormalized": "app3"}}},
		{name: "It filters application according to the paths with Exclude", items: []gitItem{{Path: "p1/*", Exclude: true}, {Path: "*"}, {Path: "*/*"}},
			dirs: []string{"app1", "app2", "p1/app2", "p1/app3", "p2/app3"}, want: []map[string]any{
				{"path": "app1", "path.basename": "app1", "path[0]": "app1", "path.basenameNormalized": "app1"},
				{"path": "app2", "path.basename": "app2", "path[0]": "app2", "path.basenameNormalized": "app2"},
				{"path": "p2/app3", "path.basename": "app3", "path[0]": "p2", "path[1]": "app3", "path.basenameNormalized": "app3"}}},
		{name: "Value variable interpolation", items: []gitItem{{Path: "*"}, {Path: "*/*"}}, dirs: []string{"app1", "p1/app2"},
			values: map[string]string{"foo": "bar", "aaa": "{{ path[0] }}", "no-op": "{{ this-does-not-exist }}"}, want: []map[string]any{
				{"values.foo": "bar", "values.no-op": "{{ this-does-not-exist }}", "values.aaa": "app1", "path": "app1", "path.basename": "app1", "path[0]": "app1", "path.basenameNormalized": "app1"},
				{"values.foo": "bar", "values.no-op": "{{ this-does-not-exist }}", "values.aaa": "p1", "path": "p1/app2", "path.basename": "app2", "path[0]": "p1", "path[1]": "app2", "path.basenameNormalized": "app2"}}},
		{name: "handles empty response from repo server", items: []gitItem{{Path: "*"}}, want: []map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExpander(t, false)
			got, err := x.directoryParams(gitGenerator{PathParamPrefix: tc.prefix, Values: tc.values}, filterDirectories(tc.items, tc.dirs))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n %v\nwant\n %v", got, tc.want)
			}
		})
	}
}

// The directories of a real tree: hidden ones and files left out.
func TestDirectories(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", ".hidden/c", "d"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a", "f.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := directories(root, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a/b", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := directories(root, 2); err == nil {
		t.Error("the bound is not kept")
	}
}

// Rows of Argo CD's TestGenerateListParams and
// TestGenerateListParamsGoTemplate, and fasttemplate's refusal of values
// that are no strings.
func TestListParams(t *testing.T) {
	for _, tc := range []struct {
		name       string
		elements   []string
		yaml       string
		goTemplate bool
		want       []map[string]any
		wantErr    bool
	}{
		{name: "fasttemplate", elements: []string{`{"cluster": "cluster","url": "url"}`}, want: []map[string]any{{"cluster": "cluster", "url": "url"}}},
		{name: "fasttemplate values", elements: []string{`{"cluster": "cluster","url": "url","values":{"foo":"bar"}}`}, want: []map[string]any{{"cluster": "cluster", "url": "url", "values.foo": "bar"}}},
		{name: "goTemplate", goTemplate: true, elements: []string{`{"cluster": "cluster","url": "url"}`}, want: []map[string]any{{"cluster": "cluster", "url": "url"}}},
		{name: "goTemplate values", goTemplate: true, elements: []string{`{"cluster": "cluster","url": "url","values":{"foo":"bar"}}`},
			want: []map[string]any{{"cluster": "cluster", "url": "url", "values": map[string]any{"foo": "bar"}}}},
		{name: "fasttemplate number", elements: []string{`{"replicas": 3}`}, wantErr: true},
		{name: "empty element", elements: []string{`{}`}, want: []map[string]any{nil}},
		{name: "elementsYaml after elements", elements: []string{`{"a": "1"}`}, yaml: "- {a: '2', m: 3}\n",
			want: []map[string]any{{"a": "1"}, {"a": "2", "m": 3.0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExpander(t, tc.goTemplate)
			var g listGenerator
			for _, e := range tc.elements {
				g.Elements = append(g.Elements, json.RawMessage(e))
			}
			g.ElementsYaml = tc.yaml
			got, err := x.listParams(g)
			if tc.wantErr {
				if err == nil {
					t.Errorf("no error; got %v", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// git ls-files pathspecs, as the repo-server matches files generator
// paths by default.
func TestPathspecMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"cluster-config/**/config.json", "cluster-config/engineering/dev/config.json", true},
		{"cluster-config/*/config.json", "cluster-config/engineering/dev/config.json", true}, // "*" crosses "/"
		{"cluster-config/*/dev/config.json", "cluster-config/engineering/prod/config.json", false},
		{"cluster-config/*/dev/config.json", "cluster-config/engineering/dev/config.json", true},
		{"apps/config.json", "apps/config.json", true},
		{"apps", "apps/x/config.json", true}, // a directory names what is under it
		{"apps/", "apps/x/config.json", true},
		{"app", "apps/config.json", false},
		{"./apps/config.json", "apps/config.json", true},
		{".", "anything", true},
		{"*.json", "a/b.json", true},
		{"?.json", "a.json", true},
		{"?.json", "ab.json", false},
		{"[ab].json", "b.json", true},
		{"[!ab].json", "b.json", false},
		{"[a-c].json", "c.json", true},
		{"[[:digit:]].json", "7.json", true},
		{`\*.json`, "*.json", true},
		{`\*.json`, "a.json", false},
		{"[.json", "[.json", true},
		{"*.yaml", "a.json", false},
	} {
		if got := pathspecMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("pathspecMatch(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func FuzzPathspecMatch(f *testing.F) {
	for _, p := range []string{"a/**/b", "[!a-c]*", `\*x`, "[[:alpha:]]", "[", "a?b"} {
		f.Add(p, "a/x/b")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		_ = pathspecMatch(pattern, name)
		if !pathspecMatch("*", name) {
			t.Fatalf("* does not match %q", name)
		}
	})
}

func TestFlatten(t *testing.T) {
	got := flatten(map[string]any{"a": map[string]any{"b": "c", "l": []any{1.0, map[string]any{"d": true}}, "e": map[string]any{}}, "n": nil})
	want := map[string]any{"a.b": "c", "a.l.0": 1.0, "a.l.1.d": true, "n": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A files generator reads no file through a link leaving the
// repository, and keeps its byte bounds.
func TestReadFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(outside, []byte("a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "config.yaml")); err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	x := newExpander(t, false)
	if _, err := x.readFile(dir, "config.yaml"); err == nil || !strings.Contains(err.Error(), "outside the repository") {
		t.Errorf("link: %v", err)
	}
	x.opts.MaxFileBytes = 50
	if _, err := x.readFile(dir, "big.yaml"); err == nil {
		t.Error("the file bound is not kept")
	}
	x.opts.MaxFileBytes, x.opts.MaxTotalBytes = 1000, 150
	if _, err := x.readFile(dir, "big.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.readFile(dir, "big.yaml"); err == nil {
		t.Error("the total bound is not kept")
	}
}

// Any file content makes parameters or an error, never a panic; with
// fasttemplate every parameter is a string.
func FuzzParamsFromFile(f *testing.F) {
	for _, s := range []string{"", "a: b", "- a: 1\n- b: [x, {c: d}]", "{\"a\": {\"b\": null}}", "- x", "a: &x [*x]", "values: {k: v}"} {
		f.Add([]byte(s), false, "")
		f.Add([]byte(s), true, "prefix")
	}
	f.Fuzz(func(t *testing.T, content []byte, goTemplate bool, prefix string) {
		x := newExpander(t, goTemplate)
		got, err := x.paramsFromFile("a/b/c.yaml", content, gitGenerator{PathParamPrefix: prefix, Values: map[string]string{"v": "{{path}}"}})
		if err != nil {
			return
		}
		for _, p := range got {
			if goTemplate {
				continue
			}
			for k, v := range p {
				if _, ok := v.(string); !ok {
					t.Fatalf("%s is %T", k, v)
				}
			}
		}
	})
}
