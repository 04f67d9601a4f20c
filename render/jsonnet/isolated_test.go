package jsonnet

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/isolate"
)

// TestEvaluateRunsInAWorker fails when Evaluate runs go-jsonnet in this
// process: the package's tests would then not exercise what truce runs.
func TestEvaluateRunsInAWorker(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.jsonnet": cm("a")})
	before := isolate.Default().Stats()
	if _, err := Evaluate(context.Background(), filepath.Join(dir, "main.jsonnet"), Options{}); err != nil {
		t.Fatal(err)
	}
	if after := isolate.Default().Stats(); after.Jobs != before.Jobs+1 {
		t.Fatalf("worker stats %+v before and %+v after: the evaluation did not run in a worker", before, after)
	}
}

// outcome is what an evaluation gave, comparable across both paths.
type outcome struct {
	Objects []map[string]any
	Sources []manifest.Source
	Err     string
	Source  manifest.Source
	Kinds   []bool
	Trace   string
}

func evaluateBoth(t *testing.T, file string, opts Options) (inProcess, worker outcome) {
	t.Helper()
	run := func(runner *isolate.Runner) outcome {
		var trace strings.Builder
		opts.Trace = &trace
		objs, err := evaluateWith(context.Background(), runner, file, opts)
		o := outcome{Trace: trace.String()}
		for _, obj := range objs {
			o.Objects = append(o.Objects, obj.Object.Object)
			o.Sources = append(o.Sources, obj.Source)
		}
		if err != nil {
			o.Err = err.Error()
			var me *manifest.Error
			if errors.As(err, &me) {
				o.Source = me.Source
			}
			for _, kind := range []error{ErrEvaluation, ErrOutput, ErrTimeout, manifest.ErrOutsideRoot, manifest.ErrTooLarge, fs.ErrInvalid} {
				o.Kinds = append(o.Kinds, errors.Is(err, kind))
			}
		}
		return o
	}
	return run(nil), run(isolate.Default())
}

// TestWorkerMatchesInProcess: objects, errors (text, position,
// classification) and traces are the same from the worker as in process.
func TestWorkerMatchesInProcess(t *testing.T) {
	tests := []struct {
		name    string
		program string
		opts    Options
	}{
		{name: "objects and trace", program: `std.trace("tracing", [` + cm("a") + `, ` + cm("b") + `])`},
		{name: "variables", program: `function(n) {apiVersion: "v1", kind: "ConfigMap", metadata: {name: n + std.extVar("s") + std.extVar("c").x}}`,
			opts: Options{ExtVars: []Var{{Name: "s", Value: "-x"}, {Name: "c", Value: "{x: 'y'}", Code: true}}, TLAs: []Var{{Name: "n", Value: "m"}}}},
		{name: "library path", program: `(import "lib.libsonnet").cm`, opts: Options{LibPaths: []string{"vendor"}}},
		{name: "runtime error in a library", program: "local l = import 'l.libsonnet';\nl.f(2)"},
		{name: "syntax error", program: "{\n  a: ,\n}"},
		{name: "stack frames", program: "local f(x) = f(x + 1) + 1;\nf(0)"},
		{name: "escape", program: `import "../outside.libsonnet"`},
		{name: "not a regular file", program: `importstr "dir"`},
		{name: "output too large", program: `[` + cm("a") + `]`, opts: Options{Manifest: manifest.Options{MaxFileBytes: 20}}},
		{name: "not objects", program: `"text"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"outside.libsonnet":            "{}",
				"repo/main.jsonnet":            tc.program,
				"repo/l.libsonnet":             "{\n  f(x):: if x > 0 then self.f(x - 1)\n    else error 'bottom reached',\n}",
				"repo/vendor/lib.libsonnet":    `{cm: ` + cm("lib") + `}`,
				"repo/dir/placeholder.jsonnet": "{}",
			})
			// Relative library paths are the working directory's.
			t.Chdir(filepath.Join(dir, "repo"))
			opts := tc.opts
			opts.Root = "."
			inProcess, worker := evaluateBoth(t, "main.jsonnet", opts)
			if diff := cmp.Diff(inProcess, worker); diff != "" {
				t.Errorf("the worker differs (-in process +worker):\n%s", diff)
			}
			if inProcess.Err == "" && len(inProcess.Objects) == 0 {
				t.Error("no objects and no error")
			}
		})
	}
}

func TestTailstrictRecursion(t *testing.T) {
	// A small stack for a quick test; truce's workers get
	// isolate.DefaultMaxStack.
	runner := isolate.NewRunner(isolate.Options{MaxStack: 8 << 20})
	t.Cleanup(func() { runner.Close() })
	dir := writeFiles(t, map[string]string{
		"deep.jsonnet": "local f(n) = if n == 0 then [] else f(n - 1) tailstrict;\nf(100000000)",
		"ok.jsonnet":   cm("fine"),
	})
	_, err := evaluateWith(context.Background(), runner, filepath.Join(dir, "deep.jsonnet"), Options{})
	if err == nil || !strings.Contains(err.Error(),
		"deep.jsonnet: evaluation stopped: the program recurses without end (the evaluator ran out of stack)") {
		t.Fatalf("error = %v", err)
	}
	if !errors.Is(err, ErrEvaluation) {
		t.Errorf("error %v is not ErrEvaluation", err)
	}
	objs, err := evaluateWith(context.Background(), runner, filepath.Join(dir, "ok.jsonnet"), Options{})
	if err != nil || len(objs) != 1 {
		t.Fatalf("after the recursion: %v, %v", summary(objs), err)
	}
	if s := runner.Stats(); s.Started != 2 {
		t.Errorf("stats %+v; want the dead worker replaced", s)
	}
}

func TestDeadlineKillsTheWorker(t *testing.T) {
	runner := isolate.NewRunner(isolate.Options{})
	t.Cleanup(func() { runner.Close() })
	dir := writeFiles(t, map[string]string{
		"spin.jsonnet": "local f(n) = if n == 0 then 0 else f(n - 1) + f(n - 1);\nf(60)",
		"ok.jsonnet":   cm("fine"),
	})
	_, err := evaluateWith(context.Background(), runner, filepath.Join(dir, "spin.jsonnet"), Options{Timeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
	if _, err := evaluateWith(context.Background(), runner, filepath.Join(dir, "ok.jsonnet"), Options{}); err != nil {
		t.Fatal(err)
	}
	if s := runner.Stats(); s.Started != 2 || s.Jobs != 1 {
		t.Errorf("stats %+v; want the looping worker killed and replaced", s)
	}
}
