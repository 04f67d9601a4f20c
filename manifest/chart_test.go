package manifest

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kustomizedFrom is how a position names the kustomization that built it.
var kustomizedFrom = regexp.MustCompile(` \(kustomization [^)]*\)`)

// TestChartDirectories walks directories holding a Chart.yaml: with
// Options.Chart they are rendered by it instead of read (a template is
// not a manifest), a kustomization beside the Chart.yaml wins, the path
// given is not the walk's to render, a chart's error is its own, and
// without Chart they are read like any directory.
func TestChartDirectories(t *testing.T) {
	tree := map[string]string{
		"plain/cm.yaml":             obj("ConfigMap", "plain"),
		"chart/Chart.yaml":          "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
		"chart/values.yaml":         "name: x\n",
		"chart/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n",
		"both/Chart.yaml":           "apiVersion: v2\nname: both\nversion: 0.1.0\n",
		"both/kustomization.yaml":   "resources: [cm.yaml]\n",
		"both/cm.yaml":              obj("ConfigMap", "kustomized"),
		"broken/Chart.yaml":         "apiVersion: v2\nname: broken\nversion: 0.1.0\n",
		"broken/templates/bad.yaml": "{{ fail }}\n",
	}
	rendered := func(ctx context.Context, dir string) ([]Object, error) {
		if filepath.Base(dir) == "broken" {
			return nil, errors.New("template failed")
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName("rendered-" + filepath.Base(dir))
		return []Object{{Object: u, Source: Source{File: filepath.Join(dir, "templates", "cm.yaml"), Line: 1}}}, nil
	}
	for _, tc := range []struct {
		name    string
		path    string // under the tree; "" is its root
		chart   func(context.Context, string) ([]Object, error)
		want    []string
		wantErr []string
	}{{
		name:    "rendered",
		chart:   rendered,
		want:    []string{"both/cm.yaml:1 v1/ConfigMap kustomized", "chart/templates/cm.yaml:1 v1/ConfigMap rendered-chart", "plain/cm.yaml:1 v1/ConfigMap plain"},
		wantErr: []string{"broken: rendering the Helm chart: template failed"},
	}, {
		name:  "the path given is the caller's",
		path:  "chart",
		chart: rendered,
		// Read as files: templates/cm.yaml is no valid manifest, which
		// the caller avoids by rendering a chart given as a path itself.
		wantErr: []string{"chart/templates/cm.yaml", "chart/values.yaml"},
	}, {
		name:    "without Chart",
		chart:   nil,
		want:    []string{"both/cm.yaml:1 v1/ConfigMap kustomized", "plain/cm.yaml:1 v1/ConfigMap plain"},
		wantErr: []string{"broken/Chart.yaml", "chart/Chart.yaml", "chart/templates/cm.yaml", "chart/values.yaml"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, tree)
			opts := Options{Chart: tc.chart}
			objs, err := LoadPaths(context.Background(), []string{filepath.Join(root, tc.path)}, opts)
			got := relSources(t, root, objs)
			for i := range got {
				got[i] = kustomizedFrom.ReplaceAllString(got[i], "")
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("objects\ngot  %q\nwant %q", got, want)
			}
			msg := ""
			if err != nil {
				msg = filepath.ToSlash(err.Error())
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}
