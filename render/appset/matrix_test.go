package appset

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func entry(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// runEntry runs one spec.generators entry and returns its parameter
// sets as sorted JSON, as Argo CD's merge tests compare them.
func runEntry(t *testing.T, x *expander, y string) ([]string, error) {
	t.Helper()
	got, err := x.transform(context.Background(), entry(t, y), 0, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range got {
		for _, p := range r.params {
			raw, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(raw))
		}
	}
	sort.Strings(out)
	return out, nil
}

func lists(elements ...string) string {
	var gens []string
	for _, e := range elements {
		gens = append(gens, "{list: {elements: "+e+"}}")
	}
	return "[" + strings.Join(gens, ", ") + "]"
}

// Rows of Argo CD's TestMatrixGenerate, TestMatrixGenerateGoTemplate and
// TestMergeGenerate, and a matrix whose second generator reads the
// first's parameters.
func TestMatrixAndMerge(t *testing.T) {
	repo := repository(t)
	for _, tc := range []struct {
		name       string
		goTemplate bool
		entry      string
		want       []string
		err        string
	}{
		{name: "matrix: two lists", entry: "matrix: {generators: " + lists(`[{a: "1"}, {a: "2"}]`, `[{b: "1"}, {b: "2"}]`) + "}",
			want: []string{`{"a":"1","b":"1"}`, `{"a":"1","b":"2"}`, `{"a":"2","b":"1"}`, `{"a":"2","b":"2"}`}},
		{name: "matrix: two lists, goTemplate", goTemplate: true, entry: "matrix: {generators: " + lists(`[{a: "1"}, {a: "2"}]`, `[{b: "1"}]`) + "}",
			want: []string{`{"a":"1","b":"1"}`, `{"a":"2","b":"1"}`}},
		{name: "matrix: parameter override: first list elements take precedence", goTemplate: true,
			entry: "matrix: {generators: " + lists(`[{booleanFalse: false, booleanTrue: true, stringFalse: "false", stringTrue: "true"}]`,
				`[{booleanFalse: true, booleanTrue: false, stringFalse: "true", stringTrue: "false"}]`) + "}",
			want: []string{`{"booleanFalse":false,"booleanTrue":true,"stringFalse":"false","stringTrue":"true"}`}},
		{name: "matrix: fasttemplate refuses a key set twice differently", entry: "matrix: {generators: " + lists(`[{a: "1"}]`, `[{a: "2"}]`) + "}",
			err: "found duplicate key a with different value, a: 1 ,b: 2"},
		{name: "matrix: returns error if there is less than two base generators", entry: "matrix: {generators: " + lists(`[{a: "1"}]`) + "}",
			err: "found less than two generators, Matrix support only two"},
		{name: "matrix: returns error if there is more than two base generators", entry: "matrix: {generators: " + lists(`[{a: "1"}]`, `[{b: "1"}]`, `[{c: "1"}]`) + "}",
			err: "found more than two generators, Matrix support only two"},
		{name: "matrix: returns error if there is more than one inner generator", entry: "matrix: {generators: [{list: {elements: [{a: '1'}]}, git: {repoURL: r, directories: [{path: '*'}]}}, {list: {elements: [{b: '1'}]}}]}",
			err: "found more than one generator in matrix.Generators"},
		{name: "matrix: the second generator reads the first's parameters", goTemplate: true,
			entry: "matrix: {generators: [{list: {elements: [{env: dev}, {env: prod}]}}, {git: {repoURL: 'https://git.example.com/x.git', files: [{path: 'clusters/{{.env}}/config.yaml'}], values: {env: '{{.env}}', missing: '{{.nothing}}'}}}]}",
			want: []string{
				`{"cluster":{"address":"https://dev","name":"dev"},"env":"dev","path":{"basename":"dev","basenameNormalized":"dev","filename":"config.yaml","filenameNormalized":"config.yaml","path":"clusters/dev","segments":["clusters","dev"]},"values":{"env":"dev","missing":"\u003cno value\u003e"}}`,
				`{"cluster":{"name":"prod-a"},"env":"prod","path":{"basename":"prod","basenameNormalized":"prod","filename":"config.yaml","filenameNormalized":"config.yaml","path":"clusters/prod","segments":["clusters","prod"]},"values":{"env":"prod","missing":"\u003cno value\u003e"}}`,
				`{"cluster":{"name":"prod-b"},"env":"prod","path":{"basename":"prod","basenameNormalized":"prod","filename":"config.yaml","filenameNormalized":"config.yaml","path":"clusters/prod","segments":["clusters","prod"]},"values":{"env":"prod","missing":"\u003cno value\u003e"}}`}},
		{name: "merge: happy flow - generate paramSets",
			entry: "merge: {mergeKeys: [b], generators: " + lists(`[{a: "1_1", b: same, c: "1_3"}]`, `[{a: "2_1", b: same}]`, `[{a: "3_1", b: different, c: "3_3"}]`) + "}",
			want:  []string{`{"a":"2_1","b":"same","c":"1_3"}`}},
		{name: "merge: merge keys absent - do not merge", entry: "merge: {mergeKeys: [b], generators: " + lists(`[{a: a}]`, `[{a: a}]`) + "}",
			want: []string{`{"a":"a"}`}},
		{name: "merge: merge key present in first set, absent in second - do not merge", entry: "merge: {mergeKeys: [b], generators: " + lists(`[{a: a}]`, `[{b: b}]`) + "}",
			want: []string{`{"a":"a"}`}},
		{name: "merge: merge nested matrix with some lists", entry: "merge: {mergeKeys: [a, b], generators: [{matrix: {generators: " +
			lists(`[{a: "1"}, {a: "2"}]`, `[{b: "1"}, {b: "2"}]`) + "}}, {list: {elements: [{a: '1', b: '1', c: added}]}}]}",
			want: []string{`{"a":"1","b":"1","c":"added"}`, `{"a":"1","b":"2"}`, `{"a":"2","b":"1"}`, `{"a":"2","b":"2"}`}},
		{name: "merge: merge nested merge with some lists", entry: "merge: {mergeKeys: [a, b], generators: [{merge: {mergeKeys: [a], generators: " +
			lists(`[{a: "1", b: "1"}, {a: "2", b: "2"}]`, `[{a: "1", b: "3", c: added}, {a: "3", b: "2"}]`) + "}}, {list: {elements: [{a: '1', b: '3', d: added}]}}]}",
			want: []string{`{"a":"1","b":"3","c":"added","d":"added"}`, `{"a":"2","b":"2"}`}},
		{name: "merge: one generator", entry: "merge: {mergeKeys: [b], generators: " + lists(`[{a: "1"}]`) + "}",
			err: "found less than two generators, Merge requires two or more"},
		{name: "merge: no merge keys", entry: "merge: {generators: " + lists(`[{a: "1"}]`, `[{a: "1"}]`) + "}",
			err: "no merge keys were specified, Merge requires at least one"},
		{name: "merge: simple key, non-unique paramSets", entry: "merge: {mergeKeys: [a], generators: " + lists(`[{a: "1"}, {a: "1"}]`, `[{a: "1"}]`) + "}",
			err: `Duplicate key was {"a":"1"}`},
		// Below a nested matrix, Argo CD's types have no matrix: the
		// child is empty.
		{name: "matrix three deep", entry: "matrix: {generators: [{matrix: {generators: [{matrix: {generators: []}}, {list: {elements: [{a: '1'}]}}]}}, {list: {elements: [{b: '1'}]}}]}",
			err: "child generator generated no parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExpander(t, tc.goTemplate)
			x.opts.Repository = func(context.Context, string, string) (string, error) { return repo, nil }
			got, err := runEntry(t, x, tc.entry)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(tc.want, "\n "))
			}
		})
	}
}

// A generator truce does not run inside a matrix makes the
// ApplicationSet Unpredictable, named.
func TestUnsupportedInMatrix(t *testing.T) {
	for y, want := range map[string]string{
		"matrix: {generators: [{list: {elements: []}}, {clusters: {}}]}":                             "clusters",
		"merge: {generators: [{matrix: {generators: [{list: {}}, {pullRequest: {}}]}}, {list: {}}]}": "pullRequest",
		"list: {elements: []}": "",
	} {
		if got := unsupportedIn(entry(t, y), 0); got != want {
			t.Errorf("%s: %q, want %q", y, got, want)
		}
	}
}
