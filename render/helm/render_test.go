package helm

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

func TestRenderSources(t *testing.T) {
	web, umbrella, crds, hooks, sub := fixture(t, "charts/web"), fixture(t, "charts/umbrella"),
		fixture(t, "charts/crds"), fixture(t, "charts/hooks"), fixture(t, "helm/subchart")
	tests := []struct {
		name       string
		dir        string
		rel        Release
		vals       map[string]any
		list       func(*Rendered) []manifest.Object
		kind, obj  string
		wantSource string
	}{
		{"template", web, Release{Name: "s"}, nil, objects, "Deployment", "s-web", filepath.Join(web, "templates/deployment.yaml")},
		{"second document of a template", web, Release{Name: "s"}, nil, objects, "ConfigMap", "s-web-second", filepath.Join(web, "templates/config.yaml")},
		{"subchart", umbrella, Release{Name: "u"}, nil, objects, "Deployment", "u-backend-api", filepath.Join(umbrella, "charts/backend/templates/deployment.yaml")},
		{"aliased subchart", umbrella, Release{Name: "u"}, map[string]any{"worker": map[string]any{"enabled": true}}, objects, "Deployment", "u-worker-worker", filepath.Join(umbrella, "charts/backend/templates/deployment.yaml")},
		{"subchart directory named differently", sub, Release{Name: "r"}, nil, objects, "Service", "subcharta", filepath.Join(sub, "charts/subchartA/templates/service.yaml")},
		{"crd included", crds, Release{Name: "c", IncludeCRDs: true}, nil, objects, "CustomResourceDefinition", "gadgets.example.com", filepath.Join(crds, "crds/widgets.yaml")},
		{"crd left out", crds, Release{Name: "c"}, nil, crdsOf, "CustomResourceDefinition", "widgets.example.com", filepath.Join(crds, "crds/widgets.yaml")},
		{"hook", hooks, Release{Name: "h"}, nil, hooksOf, "Job", "h-migrate", filepath.Join(hooks, "templates/migrate-job.yaml")},
		{"test hook", hooks, Release{Name: "h"}, nil, hooksOf, "Pod", "h-test", filepath.Join(hooks, "templates/tests/test-connection.yaml")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := mustRender(t, mustLoad(t, tc.dir), tc.rel, tc.vals, render.Options{})
			o := find(t, tc.list(out), tc.kind, tc.obj)
			want := manifest.Source{File: tc.wantSource, Renderer: manifest.RendererHelm, RenderRoot: tc.dir}
			if o.Source != want {
				t.Errorf("Source = %+v, want %+v", o.Source, want)
			}
		})
	}
}

func objects(r *Rendered) []manifest.Object { return r.Objects }
func hooksOf(r *Rendered) []manifest.Object { return r.Hooks }
func crdsOf(r *Rendered) []manifest.Object  { return r.CRDs }

// TestRenderArchivedSubchart: a subchart kept as an archive in charts/
// maps to a path inside the archive.
func TestRenderArchivedSubchart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "umbrella")
	copyDir(t, fixture(t, "charts/umbrella"), dir)
	backend := filepath.Join(dir, "charts", "backend")
	sub, err := LoadArchiveOrDir(backend)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(sub, filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	if err := removeAll(backend); err != nil {
		t.Fatal(err)
	}
	dir, _ = realPath(dir)
	out := mustRender(t, mustLoad(t, dir), Release{Name: "u"}, nil, render.Options{})
	o := find(t, out.Objects, "Deployment", "u-backend-api")
	if want := filepath.Join(dir, "charts/backend-0.1.0.tgz/templates/deployment.yaml"); o.Source.File != want {
		t.Errorf("Source.File = %s, want %s", o.Source.File, want)
	}
}

func TestRenderSplitsCRDsAndHooks(t *testing.T) {
	crds, hooks := mustLoad(t, fixture(t, "charts/crds")), mustLoad(t, fixture(t, "charts/hooks"))
	tests := []struct {
		name                  string
		ch                    *Chart
		rel                   Release
		objects, hooks, crdsW []string
	}{
		{"crds included", crds, Release{Name: "c", IncludeCRDs: true},
			[]string{"CustomResourceDefinition/widgets.example.com", "CustomResourceDefinition/gadgets.example.com", "Widget/c-widget"}, nil,
			[]string{"CustomResourceDefinition/widgets.example.com", "CustomResourceDefinition/gadgets.example.com"}},
		{"crds left out", crds, Release{Name: "c"},
			[]string{"Widget/c-widget"}, nil,
			[]string{"CustomResourceDefinition/widgets.example.com", "CustomResourceDefinition/gadgets.example.com"}},
		{"hooks", hooks, Release{Name: "h"},
			[]string{"ConfigMap/h-app"}, []string{"ConfigMap/h-done", "Pod/h-test", "Job/h-migrate"}, nil},
		{"hooks without tests", hooks, Release{Name: "h", SkipTests: true},
			[]string{"ConfigMap/h-app"}, []string{"ConfigMap/h-done", "Job/h-migrate"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := mustRender(t, tc.ch, tc.rel, nil, render.Options{})
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"Objects", names(out.Objects), tc.objects}, {"Hooks", names(out.Hooks), tc.hooks}, {"CRDs", names(out.CRDs), tc.crdsW}} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name    string
		chart   string
		rel     Release
		vals    map[string]any
		opts    render.Options
		timeout time.Duration
		want    []string
	}{
		{name: "required value", chart: "charts/required", rel: Release{Name: "r"},
			want: []string{"Helm chart required", "required/templates/deployment.yaml", "image.tag is required"}},
		{name: "tpl loop", chart: "charts/tplloop", rel: Release{Name: "t"},
			want: []string{"Helm chart tplloop", "tplloop.again", "nested reference"}},
		{name: "template that runs too long", chart: "charts/spin", rel: Release{Name: "s"},
			vals: map[string]any{"iterations": 50_000_000}, timeout: 200 * time.Millisecond,
			want: []string{"Helm chart spin", "did not finish in time", "loop forever"}},
		{name: "output too large", chart: "charts/web", rel: Release{Name: "s"},
			opts: render.Options{Manifest: manifest.Options{MaxFileBytes: 512}},
			want: []string{"Helm chart web", "larger than the 512 bytes limit"}},
		{name: "invalid release name", chart: "charts/web", rel: Release{Name: "Not_Valid"},
			want: []string{"Helm chart web", "Not_Valid"}},
		{name: "invalid kubernetes version", chart: "charts/web", rel: Release{Name: "s"},
			opts: render.Options{KubeVersion: "latest"}, want: []string{"invalid Kubernetes version"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			_, err := Render(ctx, mustLoad(t, fixture(t, tc.chart)), tc.rel, tc.vals, tc.opts)
			if err == nil || !contains(err.Error(), tc.want...) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if tc.timeout > 0 && time.Since(start) > 10*tc.timeout {
				t.Errorf("Render returned after %v, deadline was %v", time.Since(start), tc.timeout)
			}
		})
	}
}

// TestRenderDecodeErrorsNameTheTemplate: objects Helm renders but
// Kubernetes would refuse are reported at their template.
func TestRenderDecodeErrorsNameTheTemplate(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: bad\nversion: 0.1.0\n",
		"templates/good.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n",
		"templates/bad.yaml":  "apiVersion: v1\nmetadata:\n  name: nokind\n",
	})
	dir, _ = realPath(dir)
	out, err := Render(context.Background(), mustLoad(t, dir), Release{Name: "b"}, nil, render.Options{})
	var me *manifest.Error
	if !errors.As(err, &me) {
		t.Fatalf("error = %v, want a *manifest.Error", err)
	}
	want := manifest.Source{File: filepath.Join(dir, "templates/bad.yaml"), Renderer: manifest.RendererHelm, RenderRoot: dir}
	if me.Source != want || !strings.Contains(me.Msg, "missing kind") {
		t.Errorf("error = %+v, want missing kind at %+v", me, want)
	}
	if got := names(out.Objects); !slices.Equal(got, []string{"ConfigMap/good"}) {
		t.Errorf("Objects = %v, want the good one", got)
	}
}

// TestRenderLeavesChartUnchanged: Helm's dependency processing rewrites
// the chart it renders; a Chart renders the same however often.
func TestRenderLeavesChartUnchanged(t *testing.T) {
	ch := mustLoad(t, fixture(t, "charts/umbrella"))
	deps, values := len(ch.Chart.Dependencies()), len(ch.Chart.Values)
	first := names(mustRender(t, ch, Release{Name: "u"}, nil, render.Options{}).Objects)
	withWorker := names(mustRender(t, ch, Release{Name: "u"}, map[string]any{"worker": map[string]any{"enabled": true}, "backend": map[string]any{"enabled": false}}, render.Options{}).Objects)
	again := names(mustRender(t, ch, Release{Name: "u"}, nil, render.Options{}).Objects)
	if !slices.Equal(first, again) {
		t.Errorf("second render = %v, first = %v", again, first)
	}
	if slices.Equal(first, withWorker) {
		t.Errorf("values had no effect: %v", withWorker)
	}
	if n := len(ch.Chart.Dependencies()); n != deps {
		t.Errorf("chart has %d dependencies after rendering, want %d", n, deps)
	}
	if n := len(ch.Chart.Values); n != values {
		t.Errorf("chart has %d top-level values after rendering, want %d", n, values)
	}
	for _, d := range ch.Chart.Metadata.Dependencies {
		if d.Enabled {
			t.Errorf("dependency %s marked enabled by a render", d.Name)
		}
	}
}

func TestRenderLibraryChart(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Chart.yaml": "apiVersion: v2\nname: lib\ntype: library\nversion: 0.1.0\n"})
	_, err := Render(context.Background(), mustLoad(t, dir), Release{Name: "l"}, nil, render.Options{})
	if err == nil || !strings.Contains(err.Error(), "library charts are not installable") {
		t.Fatalf("error = %v", err)
	}
}

func TestRenderKubeVersionConstraint(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: future\nversion: 0.1.0\nkubeVersion: \">=1.40.0-0\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	ch := mustLoad(t, dir)
	for _, tc := range []struct {
		kube    string
		wantErr bool
	}{{"", true}, {"v1.39.9", true}, {"v1.40.0", false}} {
		_, err := Render(context.Background(), ch, Release{Name: "f"}, nil, render.Options{KubeVersion: tc.kube})
		if (err != nil) != tc.wantErr || err != nil && !contains(err.Error(), "Helm chart future", "requires kubeVersion") {
			t.Errorf("Kubernetes %q: error = %v, want error %v", tc.kube, err, tc.wantErr)
		}
	}
}
