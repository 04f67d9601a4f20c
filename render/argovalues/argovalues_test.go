package argovalues

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestSourcesInline(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		want    []map[string]any
		wantErr string
	}{
		{name: "no sources", spec: `{}`},
		{name: "values text", spec: `{source: {chart: c, helm: {values: "a: 1\nb: {c: x}\n"}}}`,
			want: []map[string]any{{"a": float64(1), "b": map[string]any{"c": "x"}}}},
		{name: "valuesObject replaces values", spec: `{source: {chart: c, helm: {values: "a: 1\n", valuesObject: {b: 2}}}}`,
			want: []map[string]any{{"b": float64(2)}}},
		{name: "set after the inline values, typed; set-string after set", spec: `{source: {chart: c, helm: {valuesObject: {a: 1, l: [x, y]},
  parameters: [{name: a, value: "2"}, {name: "l[1]", value: z}, {name: s, value: "3", forceString: true}, {name: b, value: "true"}, {name: s, value: "4"}]}}}`,
			want: []map[string]any{{"a": int64(2), "l": []any{"x", "z"}, "s": "3", "b": true}}},
		{name: "a repeated name keeps its last value", spec: `{source: {chart: c, helm: {parameters: [{name: a, value: "1"}, {name: a, value: "2"}]}}}`,
			want: []map[string]any{{"a": int64(2)}}},
		{name: "commas are escaped, a {list} is a list", spec: `{source: {chart: c, helm: {parameters: [{name: csv, value: "a,b"}, {name: l, value: "{a,b}"}]}}}`,
			want: []map[string]any{{"csv": "a,b", "l": []any{"a", "b"}}}},
		{name: "every source, in order", spec: `{source: {chart: a}, sources: [{chart: b, helm: {valuesObject: {x: 1}}}, {chart: c}]}`,
			want: []map[string]any{{}, {"x": float64(1)}, {}}},
		{name: "values not YAML", spec: `{sources: [{chart: c, helm: {values: "a: [b"}}]}`, wantErr: "spec.sources[0].helm.values"},
		{name: "values of the wrong type", spec: `{source: {chart: c, helm: {values: {a: 1}}}}`, wantErr: "spec.source.helm.values"},
		{name: "a parameter that is not an object", spec: `{source: {chart: c, helm: {parameters: [x]}}}`, wantErr: "spec.source.helm.parameters[0]: a string"},
		{name: "sources not a list", spec: `{sources: {chart: c}}`, wantErr: "spec.sources"},
		{name: "a parameter Helm refuses", spec: `{source: {chart: c, helm: {parameters: [{name: "a[x]", value: "1"}]}}}`, wantErr: "spec.source.helm.parameters: --set a[x]=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &unstructured.Unstructured{Object: map[string]any{}}
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			app.Object["spec"] = spec
			sources, err := Sources(app)
			var got []map[string]any
			for _, s := range sources {
				if err != nil {
					break
				}
				var v map[string]any
				v, err = s.Inline()
				got = append(got, v)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstalls(t *testing.T) {
	s := Source{Chart: "gatekeeper", RepoURL: "https://Open-Policy-Agent.github.io/gatekeeper/charts/"}
	if !s.Installs("gatekeeper", "open-policy-agent.github.io/gatekeeper/charts") {
		t.Error("the chart from its repository, in another case: not installed")
	}
	if s.Installs("gatekeeper", "example.com/charts") || s.Installs("kyverno", "open-policy-agent.github.io") {
		t.Error("another repository or chart: installed")
	}
}
