package world

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/render/helm"
)

// A pulled chart's valuesFiles are its own files; values.yaml is its
// values.
func TestValuesFilesOfAPulledChart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "web")
	writeChart(t, dir, "web")
	writeFile(t, filepath.Join(dir, "values-prod.yaml"), "name: from-prod\nextra: 1\n")
	ch, err := helm.Load(context.Background(), dir, helm.LoadOptions{RepositoryRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		files         []string
		ignore        bool
		want, problem string
	}{
		{files: nil, want: "from-chart"},
		{files: []string{"values.yaml"}, want: "from-chart"},
		{files: []string{"values.yaml", "./values-prod.yaml"}, want: "from-prod"},
		{files: []string{"values-prod.yaml", "values.yaml"}, want: "from-chart"},
		{files: []string{"values-prod.yaml", "nope.yaml"}, ignore: true, want: "from-prod"},
		{files: []string{"nope.yaml"}, problem: "no values file found at path 'nope.yaml'"},
	}
	for _, tc := range tests {
		got, err := chartValuesFiles{Files: tc.files, IgnoreMissing: tc.ignore}.apply(ch, "")
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("%v: error %v, want %q", tc.files, err, tc.problem)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.files, err)
			continue
		}
		if name := got.Chart.Values["name"]; name != tc.want {
			t.Errorf("%v: name = %v, want %s", tc.files, name, tc.want)
		}
	}
	if ch.Chart.Values["name"] != "from-chart" {
		t.Error("apply changed the chart it was given")
	}
}
