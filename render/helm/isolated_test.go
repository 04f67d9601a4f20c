package helm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/isolate"
)

// TestRenderRunsInAWorker fails when Render evaluates templates in this
// process: the package's tests would then not exercise what truce runs.
func TestRenderRunsInAWorker(t *testing.T) {
	before := isolate.Default().Stats()
	mustRender(t, mustLoad(t, fixture(t, "charts/web")), Release{Name: "s"}, nil, render.Options{})
	after := isolate.Default().Stats()
	if after.Jobs != before.Jobs+1 || after.Started < 1 {
		t.Fatalf("worker stats %+v before and %+v after a render: it did not run in a worker", before, after)
	}
}

// renderValues are the engine's input for ch as installClientOnly.run
// computes them.
func renderValues(t *testing.T, ch *Chart, vals map[string]any) (*Chart, common.Values) {
	t.Helper()
	c := cloneChart(ch.Chart)
	vals = copyValues(vals)
	if vals == nil {
		vals = map[string]any{}
	}
	if err := chartutil.ProcessDependencies(c, vals); err != nil {
		t.Fatal(err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.APIVersions = append(caps.APIVersions, "example.com/v1")
	top, err := util.ToRenderValuesWithSchemaValidation(c, vals,
		common.ReleaseOptions{Name: "r", Namespace: "ns", Revision: 1, IsInstall: true}, caps, false)
	if err != nil {
		t.Fatal(err)
	}
	return &Chart{Dir: ch.Dir, Chart: c}, top
}

// TestWorkerEngineMatchesInProcess compares Helm's engine output, template
// by template and byte for byte, in the worker and in process, on inputs
// whose Go types could be changed by the trip (empty and nil lists and
// maps, integers and floats, Chart.yaml annotations, import-values).
func TestWorkerEngineMatchesInProcess(t *testing.T) {
	tests := []struct {
		chart  string
		values ArgoValues
	}{
		{chart: "charts/wire"},
		{chart: "charts/wire", values: ArgoValues{
			Parameters: []Parameter{{Name: "whole", Value: "42"}, {Name: "nested.list[1]", Value: "null"}, {Name: "text", Value: "8", ForceString: true}},
			Values:     "extra:\n  empty: []\n  none: {}\n  n: 1e3\n"}},
		{chart: "charts/web", values: ArgoValues{Files: []string{"values-prod.yaml"}}},
		{chart: "charts/umbrella"},
		{chart: "charts/schema"},
		{chart: "charts/hooks"},
		{chart: "charts/withlib"},
		{chart: "helm/subchart", values: ArgoValues{Files: []string{"extra_values.yaml"}}},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.chart, func(t *testing.T) {
			dir := fixture(t, tc.chart)
			vals, err := tc.values.Merge(ctx, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			ch := mustLoad(t, dir)
			c1, top1 := renderValues(t, ch, vals)
			want, err := renderTemplates(ctx, nil, c1.Chart, top1)
			if err != nil {
				t.Fatal(err)
			}
			c2, top2 := renderValues(t, ch, vals)
			got, err := renderInWorker(ctx, isolate.Default(), c2.Chart, top2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("worker output differs (-in process +worker):\n%s", diff)
			}
		})
	}
}

func TestValuesWire(t *testing.T) {
	in := map[string]any{
		"nil": nil, "t": true, "f": false, "s": "x", "n": int64(-5), "i": 7, "u": uint64(1 << 63),
		"i8": int8(-1), "i16": int16(2), "i32": int32(3), "u8": uint8(4), "u16": uint16(5), "u32": uint32(6), "ui": uint(8),
		"f32": float32(1.25), "f64": 2.5, "num": "12",
		"emptyList": []any{}, "nilList": []any(nil), "emptyMap": map[string]any{}, "nilMap": map[string]any(nil),
		"values": common.Values{"a": []any{map[string]any{}, nil}}, "nilValues": common.Values(nil),
		"strmap": map[string]string{"k": "v"}, "emptyStrmap": map[string]string{}, "nilStrmap": map[string]string(nil),
		"strs": []string{"a", ""}, "nilStrs": []string(nil),
		"deep": map[string]any{"a": map[string]any{"b": []any{[]any{}, map[string]any{"c": int64(1)}}}},
	}
	nodes, err := encodeValues(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeValues(nodes)
	if err != nil {
		t.Fatal(err)
	}
	// cmp tells nil from empty maps and slices, and types apart.
	if diff := cmp.Diff(any(in), out); diff != "" {
		t.Errorf("values changed on the wire:\n%s", diff)
	}
	if _, err := encodeValues(map[string]any{"t": time.Second}); err == nil {
		t.Error("a time.Duration was encoded")
	}
}

func TestRenderRecursionWithoutEnd(t *testing.T) {
	// A small stack for a quick test; truce's workers get
	// isolate.DefaultMaxStack.
	runner := isolate.NewRunner(isolate.Options{MaxStack: 8 << 20})
	t.Cleanup(func() { runner.Close() })
	start := time.Now()
	_, err := renderWith(context.Background(), runner, mustLoad(t, fixture(t, "charts/tplstack")), Release{Name: "t"}, nil, render.Options{})
	if err == nil || !contains(err.Error(), "Helm chart tplstack",
		"rendering stopped: templates recurse without end (the renderer ran out of stack)") {
		t.Fatalf("error = %v", err)
	}
	if !errors.Is(err, isolate.ErrOutOfStack) {
		t.Errorf("error %v is not ErrOutOfStack", err)
	}
	if strings.Contains(err.Error(), "goroutine") {
		t.Errorf("error carries a goroutine dump: %v", err)
	}
	t.Logf("the recursion was stopped after %v", time.Since(start))
	// This process lives on, and the next render gets a new worker.
	if _, err := renderWith(context.Background(), runner, mustLoad(t, fixture(t, "charts/web")), Release{Name: "s"}, nil, render.Options{}); err != nil {
		t.Fatal(err)
	}
	if s := runner.Stats(); s.Started != 2 || s.Jobs != 1 {
		t.Errorf("stats %+v; want 2 workers started, 1 job answered", s)
	}
}

func TestRenderDeadlineKillsTheWorker(t *testing.T) {
	runner := isolate.Default()
	ch := mustLoad(t, fixture(t, "charts/spin"))
	mustRender(t, mustLoad(t, fixture(t, "charts/web")), Release{Name: "s"}, nil, render.Options{})
	before := runner.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Render(ctx, ch, Release{Name: "s"}, map[string]any{"iterations": 500_000_000}, render.Options{})
	if err == nil || !contains(err.Error(), "did not finish in time") {
		t.Fatalf("error = %v", err)
	}
	mustRender(t, mustLoad(t, fixture(t, "charts/web")), Release{Name: "s"}, nil, render.Options{})
	if after := runner.Stats(); after.Started != before.Started+1 {
		t.Errorf("workers started: %d before, %d after the deadline; want the looping one replaced", before.Started, after.Started)
	}
}

// FuzzDecodeEngineRequest feeds the worker's decoder arbitrary jobs: an
// error, never a panic.
func FuzzDecodeEngineRequest(f *testing.F) {
	ch := mustLoad(f, fixture(f, "charts/wire"))
	vals, err := ArgoValues{}.Merge(context.Background(), ch.Dir, nil)
	if err != nil {
		f.Fatal(err)
	}
	c := cloneChart(ch.Chart)
	if err := chartutil.ProcessDependencies(c, vals); err != nil {
		f.Fatal(err)
	}
	top, err := util.ToRenderValues(c, vals, common.ReleaseOptions{Name: "r"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := encodeEngineRequest(c, top)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, payload []byte) {
		_, _, _ = decodeEngineRequest(payload)
	})
}

// BenchmarkRender measures what the worker costs per render: the same
// chart rendered in process and through one reused worker.
func BenchmarkRender(b *testing.B) {
	for _, chart := range []string{"charts/web", "helm/subchart"} {
		ch := mustLoad(b, fixture(b, chart))
		for _, mode := range []struct {
			name   string
			runner *isolate.Runner
		}{{"in-process", nil}, {"worker", isolate.Default()}} {
			b.Run(chart+"/"+mode.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := renderWith(context.Background(), mode.runner, ch, Release{Name: "bench", Namespace: "ns"}, nil, render.Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkEngineWire is the CPU the worker adds to a render besides the
// round trip: encoding the chart and values, decoding them in the worker.
func BenchmarkEngineWire(b *testing.B) {
	for _, name := range []string{"charts/web", "helm/subchart"} {
		ch := mustLoad(b, fixture(b, name))
		c := cloneChart(ch.Chart)
		if err := chartutil.ProcessDependencies(c, map[string]any{}); err != nil {
			b.Fatal(err)
		}
		top, err := util.ToRenderValues(c, map[string]any{}, common.ReleaseOptions{Name: "r"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				payload, err := encodeEngineRequest(c, top)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := decodeEngineRequest(payload); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(payload)))
			}
		})
	}
}
