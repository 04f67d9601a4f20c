package jsonnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/manifest"
)

// writeFiles creates files (path -> content) under a new directory and
// returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// summary describes objects as "kind/name" strings.
func summary(objs []manifest.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Object.GetKind() + "/" + o.Object.GetName()
	}
	return out
}

func cm(name string) string {
	return fmt.Sprintf(`{apiVersion: "v1", kind: "ConfigMap", metadata: {name: %q}}`, name)
}

func TestEvaluateOutputShapes(t *testing.T) {
	tests := []struct {
		name    string
		program string
		want    []string
		wantErr error
		errText string
	}{
		{name: "object", program: cm("a"), want: []string{"ConfigMap/a"}},
		{name: "array", program: "[" + cm("a") + "," + cm("b") + "]", want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "null output is nothing", program: "null", want: []string{}},
		{name: "empty array", program: "[]", want: []string{}},
		{name: "null elements skipped", program: "[null," + cm("a") + ", null]", want: []string{"ConfigMap/a"}},
		{name: "List flattened", program: `{apiVersion: "v1", kind: "List", items: [` + cm("a") + "," + cm("b") + "]}",
			want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "List in array flattened", program: `[{apiVersion: "v1", kind: "ConfigMapList", items: [` + cm("a") + "]}," + cm("b") + "]",
			want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "List with null items dropped", program: `[{apiVersion: "v1", kind: "List", items: null},` + cm("b") + "]",
			want: []string{"ConfigMap/b"}},
		{name: "nested array rejected as in Argo CD", program: "[[" + cm("a") + "]]", wantErr: ErrOutput,
			errText: "an array with an element that is not an object"},
		{name: "string rejected", program: `"hello"`, wantErr: ErrOutput, errText: "the output is a string"},
		{name: "object without kind rejected", program: `{apiVersion: "v1", metadata: {name: "x"}}`, wantErr: ErrOutput,
			errText: "Kind"},
		{name: "array element without kind rejected", program: "[" + cm("a") + `, {apiVersion: "v1"}]`, wantErr: ErrOutput},
		{name: "object without name is an invalid object", program: "[" + cm("a") + `, {apiVersion: "v1", kind: "ConfigMap"}]`,
			want: []string{"ConfigMap/a"}, wantErr: manifest.ErrInvalidObject, errText: "object 2 of the output: ConfigMap is missing metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"main.jsonnet": tt.program})
			file := filepath.Join(dir, "main.jsonnet")
			objs, err := Evaluate(context.Background(), file, Options{})
			if got := strings.Join(summary(objs), " "); got != strings.Join(tt.want, " ") {
				t.Errorf("objects = %q, want %q", got, tt.want)
			}
			checkErr(t, err, tt.wantErr, tt.errText)
			for _, o := range objs {
				want := manifest.Source{File: file, Renderer: manifest.RendererJsonnet, RenderRoot: file}
				if o.Source != want {
					t.Errorf("source = %+v, want %+v", o.Source, want)
				}
			}
		})
	}
}

func checkErr(t *testing.T, err, want error, text string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("error = %v, want %v", err, want)
	case text != "" && (err == nil || !strings.Contains(err.Error(), text)):
		t.Fatalf("error = %v, want it to contain %q", err, text)
	}
}

func TestEvaluateVariables(t *testing.T) {
	const program = `function(name, replicas=1) {
  apiVersion: "apps/v1", kind: "Deployment",
  metadata: {name: name, annotations: {ext: std.toString(std.extVar("ext"))}},
  spec: {replicas: replicas},
}`
	tests := []struct {
		name         string
		tlas, ext    []Var
		wantReplicas any
		wantExt      string
		wantErr      error
		errText      string
	}{
		{name: "strings", tlas: []Var{{Name: "name", Value: "web"}, {Name: "replicas", Value: "3"}},
			ext: []Var{{Name: "ext", Value: "1+1"}}, wantReplicas: "3", wantExt: "1+1"},
		{name: "code", tlas: []Var{{Name: "name", Value: "web"}, {Name: "replicas", Value: "1+2", Code: true}},
			ext: []Var{{Name: "ext", Value: "{a: 1+1}", Code: true}}, wantReplicas: int64(3), wantExt: `{"a": 2}`},
		{name: "default TLA", tlas: []Var{{Name: "name", Value: "web"}}, ext: []Var{{Name: "ext", Value: "x"}},
			wantReplicas: int64(1), wantExt: "x"},
		{name: "missing extVar", tlas: []Var{{Name: "name", Value: "web"}}, wantErr: ErrEvaluation,
			errText: "main.jsonnet:3: Undefined external variable: ext"},
		{name: "bad code names its origin", tlas: []Var{{Name: "name", Value: "web"}, {Name: "replicas", Value: "1 +", Code: true}},
			ext: []Var{{Name: "ext", Value: "x"}}, wantErr: ErrEvaluation, errText: "<top-level-arg:replicas>:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"main.jsonnet": program})
			objs, err := Evaluate(context.Background(), filepath.Join(dir, "main.jsonnet"), Options{TLAs: tt.tlas, ExtVars: tt.ext})
			checkErr(t, err, tt.wantErr, tt.errText)
			if tt.wantErr != nil {
				return
			}
			if len(objs) != 1 {
				t.Fatalf("got %d objects", len(objs))
			}
			o := objs[0].Object
			if got := o.Object["spec"].(map[string]any)["replicas"]; got != tt.wantReplicas {
				t.Errorf("replicas = %#v, want %#v", got, tt.wantReplicas)
			}
			if got := strings.Join(strings.Fields(o.GetAnnotations()["ext"]), " "); got != tt.wantExt {
				t.Errorf("ext = %q, want %q", got, tt.wantExt)
			}
			if o.GetName() != "web" {
				t.Errorf("name = %q", o.GetName())
			}
		})
	}
}

func TestEvaluateLibPaths(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"app/main.jsonnet":         `local l = import "lib.libsonnet"; local n = import "near.libsonnet"; ` + cm("x") + ` + {metadata+: {labels: {lib: l.v, near: n.v}}}`,
		"app/near.libsonnet":       `{v: "near"}`,
		"vendor/a/lib.libsonnet":   `{v: "a"}`,
		"vendor/b/lib.libsonnet":   `{v: "b"}`,
		"vendor/b/near.libsonnet":  `{v: "vendor"}`,
		"other/main-lib.libsonnet": `{}`,
	})
	// Like jsonnet -J: the importing file's directory first, then the
	// last library path first.
	objs, err := Evaluate(context.Background(), filepath.Join(dir, "app/main.jsonnet"), Options{
		Root:     dir,
		LibPaths: []string{filepath.Join(dir, "vendor/a"), filepath.Join(dir, "vendor/b")},
	})
	if err != nil {
		t.Fatal(err)
	}
	labels := objs[0].Object.GetLabels()
	if labels["lib"] != "b" || labels["near"] != "near" {
		t.Errorf("labels = %v, want lib=b near=near", labels)
	}
}

func TestEvaluateRefusesEscapes(t *testing.T) {
	outside := writeFiles(t, map[string]string{"secret.txt": "secret", "x.libsonnet": "{}"})
	tests := []struct {
		name    string
		files   map[string]string
		link    [2]string // symlink name -> target ("" for none)
		opts    Options
		wantErr error
		errText string
	}{
		{name: "relative escape", files: map[string]string{"repo/main.jsonnet": `import "../x.libsonnet"`, "x.libsonnet": "{}"},
			wantErr: manifest.ErrOutsideRoot, errText: `refusing import "../x.libsonnet": it resolves outside the repository root`},
		{name: "absolute path", files: map[string]string{"repo/main.jsonnet": fmt.Sprintf("importstr %q", filepath.Join(outside, "secret.txt"))},
			wantErr: manifest.ErrOutsideRoot, errText: "outside the repository root"},
		{name: "symlink out", files: map[string]string{"repo/main.jsonnet": `importstr "link.txt"`},
			link: [2]string{"repo/link.txt", filepath.Join(outside, "secret.txt")}, wantErr: manifest.ErrOutsideRoot},
		{name: "device", files: map[string]string{"repo/main.jsonnet": `importstr "/dev/zero"`}, wantErr: manifest.ErrOutsideRoot},
		{name: "too large", files: map[string]string{"repo/main.jsonnet": `importstr "big.txt"`, "repo/big.txt": strings.Repeat("x", 2000)},
			opts: Options{Manifest: manifest.Options{MaxFileBytes: 1000}}, wantErr: manifest.ErrTooLarge, errText: "larger than the 1000-byte limit"},
		{name: "missing import", files: map[string]string{"repo/main.jsonnet": `import "nope.libsonnet"`},
			wantErr: ErrEvaluation, errText: `main.jsonnet:1: couldn't open import "nope.libsonnet"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			if tt.link[0] != "" {
				if err := os.Symlink(tt.link[1], filepath.Join(dir, tt.link[0])); err != nil {
					t.Fatal(err)
				}
			}
			opts := tt.opts
			opts.Root = filepath.Join(dir, "repo")
			_, err := Evaluate(context.Background(), filepath.Join(dir, "repo/main.jsonnet"), opts)
			checkErr(t, err, tt.wantErr, tt.errText)
			var me *manifest.Error
			if !errors.As(err, &me) || !strings.HasSuffix(me.Source.File, "main.jsonnet") {
				t.Errorf("error %v does not name main.jsonnet", err)
			}
		})
	}
}

func TestEvaluateHostile(t *testing.T) {
	tests := []struct {
		name    string
		program string
		opts    Options
		wantErr error
		errText string
	}{
		{name: "infinite recursion", program: "local f(x) = f(x + 1) + 1;\nf(0)", wantErr: ErrEvaluation,
			errText: "main.jsonnet:1: max stack frames exceeded"},
		{name: "endless work", program: "local f(n) = if n == 0 then 0 else f(n - 1) + f(n - 1);\nf(60)",
			opts: Options{Timeout: 300 * time.Millisecond}, wantErr: ErrTimeout, errText: "did not finish within 300ms"},
		{name: "huge output", program: `std.makeArray(100, function(i) {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "c" + i}, data: {x: std.repeat("x", 100)}})`,
			opts: Options{Manifest: manifest.Options{MaxFileBytes: 5000}}, wantErr: manifest.ErrTooLarge, errText: "larger than the 5000-byte limit"},
		{name: "too many objects", program: `std.makeArray(20, function(i) {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "c" + i}})`,
			opts: Options{Manifest: manifest.Options{MaxDocuments: 10}}, wantErr: manifest.ErrTooManyDocuments},
		{name: "runtime error in a library names its line", program: "local l = import 'l.libsonnet';\nl.f(2)", wantErr: ErrEvaluation,
			errText: "l.libsonnet:3 (jsonnet "},
		{name: "syntax error names its line", program: "{\n  a: ,\n}", wantErr: ErrEvaluation, errText: "main.jsonnet:2: Unexpected"},
		{name: "error statement", program: "\n\nerror 'no way'", wantErr: ErrEvaluation, errText: "main.jsonnet:3: no way"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"main.jsonnet": tt.program,
				"l.libsonnet":  "{\n  f(x):: if x > 0 then self.f(x - 1)\n    else error 'bottom reached',\n}",
			})
			start := time.Now()
			_, err := Evaluate(context.Background(), filepath.Join(dir, "main.jsonnet"), tt.opts)
			checkErr(t, err, tt.wantErr, tt.errText)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestEvaluateHonoursContext(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.jsonnet": "local f(n) = if n == 0 then 0 else f(n - 1) + f(n - 1);\nf(60)"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := Evaluate(ctx, filepath.Join(dir, "main.jsonnet"), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
}

func TestEvaluateTrace(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.jsonnet": `std.trace("hello", null)`})
	var b strings.Builder
	if _, err := Evaluate(context.Background(), filepath.Join(dir, "main.jsonnet"), Options{Trace: &b}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "hello") {
		t.Errorf("trace = %q", b.String())
	}
}
