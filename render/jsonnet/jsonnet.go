// Package jsonnet evaluates Jsonnet programs into Kubernetes objects the way
// Argo CD's repo-server does for the .jsonnet files of a directory source:
// with github.com/google/go-jsonnet, the importing file's directory and the
// library paths as import search path, external variables and top-level
// arguments as strings or code, and the output read as one object, an array
// of objects or a List.
//
// Unlike Argo CD it treats the program as hostile: imports cannot leave the
// repository, evaluation is bounded in time and output size, and every
// failure names the file (and, for Jsonnet errors, the line).
//
// One hazard of go-jsonnet (and so of Argo CD) needs a process of its own:
// a call marked tailstrict does not count against MaxStack but still grows
// the Go stack, and exhausting the stack is fatal to the whole process.
// Evaluation therefore runs in a worker process (package isolate), where
// it is an error naming the file.
package jsonnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	gojsonnet "github.com/google/go-jsonnet"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/isolate"
)

// DefaultTimeout bounds one evaluation when Options.Timeout is zero. Real
// programs take milliseconds to seconds; a minute is also what Argo CD gives
// a whole manifest generation by default.
const DefaultTimeout = time.Minute

// MaxStack is go-jsonnet's (and so Argo CD's) default bound on the depth of
// the Jsonnet call stack: unbounded recursion fails with "max stack frames
// exceeded" once it is reached. It is not configurable, because a program
// that needs more would fail in Argo CD too.
const MaxStack = 500

// Sentinel errors classify the *manifest.Error values Evaluate returns.
var (
	// ErrEvaluation means the program failed: a syntax error, a runtime
	// error, error "..." in the program, or the call stack limit.
	ErrEvaluation = errors.New("jsonnet evaluation failed")
	// ErrTimeout means the evaluation did not finish within the timeout.
	ErrTimeout = errors.New("jsonnet evaluation timed out")
	// ErrOutput means the program's result is not what Argo CD accepts: an
	// object, an array of objects or a List.
	ErrOutput = errors.New("jsonnet output is not Kubernetes objects")
)

// Var is an external variable (std.extVar) or a top-level argument: a
// string, or Jsonnet code evaluated in the program's context when Code is
// set, as in Argo CD's spec.source.directory.jsonnet.extVars and tlas.
type Var struct {
	Name  string
	Value string
	Code  bool
}

// Options direct and bound one evaluation.
type Options struct {
	// LibPaths are searched for imports not found next to the importing
	// file, the last one first (like jsonnet -J). Relative paths are
	// relative to the working directory.
	LibPaths []string
	// ExtVars and TLAs are passed to the program. Values are used as they
	// are; Argo CD's $ARGOCD_APP_* substitution is the caller's business.
	ExtVars []Var
	TLAs    []Var
	// Manifest bounds decoding the output; its MaxFileBytes also caps the
	// size of the output and of every imported file.
	Manifest manifest.Options
	// Root is the directory imports must stay in (symlinks resolved),
	// normally the repository's root. Empty means the directory of the
	// evaluated file.
	Root string
	// Timeout bounds the evaluation; zero means DefaultTimeout.
	Timeout time.Duration
	// Trace receives std.trace output; nil discards it.
	Trace io.Writer
}

// Evaluate evaluates the Jsonnet file and returns the objects of its output,
// each with Source{File: file, Renderer: manifest.RendererJsonnet,
// RenderRoot: file}. The output must be an object, an array of objects
// (null elements are skipped) or null, exactly as Argo CD requires; objects
// that are Lists (items is an array) are replaced by their items. Nested
// arrays are not flattened: Argo CD rejects them too.
//
// The evaluation runs in a worker process (package isolate): when ctx is
// done or the timeout passes, the worker is killed and Evaluate returns at
// once, and a tailstrict recursion that exhausts the stack is an error
// instead of the end of truce. Without a worker (an executable that does
// not call isolate.Main) it runs on a goroutine of this process, abandoned
// at the deadline to run on until it ends by itself.
//
// Errors are *manifest.Error values (or an errors.Join of them), classified
// by ErrEvaluation, ErrTimeout, ErrOutput, manifest.ErrOutsideRoot (an
// import leaving Root), manifest.ErrTooLarge and the decoding errors of
// package manifest. Objects that decoded cleanly are returned alongside
// decoding errors, as manifest.Decode does.
func Evaluate(ctx context.Context, file string, opts Options) ([]manifest.Object, error) {
	return evaluateWith(ctx, isolate.Default(), file, opts)
}

// evaluateWith is Evaluate in runner's workers, or in process when runner
// is nil or has no worker.
func evaluateWith(ctx context.Context, runner *isolate.Runner, file string, opts Options) ([]manifest.Object, error) {
	mopts := withDefaults(opts.Manifest)
	src := manifest.Source{File: file, Renderer: manifest.RendererJsonnet, RenderRoot: file}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fileError(src, err, "cannot resolve path: "+err.Error())
	}
	root := opts.Root
	if root == "" {
		root = filepath.Dir(abs)
	}
	if root, err = realDir(root); err != nil {
		return nil, fileError(src, err, "cannot resolve the repository root: "+err.Error())
	}
	job := evalJob{
		File: file, Abs: abs, Root: root, ExtVars: opts.ExtVars, TLAs: opts.TLAs,
		MaxFileBytes: mopts.MaxFileBytes, MaxTotalBytes: mopts.MaxTotalBytes,
	}
	// The worker may not share this process's working directory.
	for _, p := range opts.LibPaths {
		if p, err = filepath.Abs(p); err != nil {
			return nil, fileError(src, err, "cannot resolve a library path: "+err.Error())
		}
		job.LibPaths = append(job.LibPaths, p)
	}

	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, &timeoutError{})
	defer cancel()
	res, err := evaluateIsolated(ctx, runner, job)
	if errors.Is(err, isolate.ErrUnavailable) {
		res, err = evaluateInProcess(ctx, job)
	}
	if err != nil {
		var timedOut *timeoutError
		switch {
		case errors.As(err, &timedOut):
			return nil, fileError(src, ErrTimeout, fmt.Sprintf(
				"evaluation did not finish within %v; the program loops or does too much work", timeout))
		case ctx.Err() != nil:
			return nil, fileError(src, err, "evaluation stopped: "+err.Error())
		case errors.Is(err, isolate.ErrOutOfStack):
			return nil, fileError(src, ErrEvaluation,
				"evaluation stopped: the program recurses without end (the evaluator ran out of stack)")
		case errors.Is(err, isolate.ErrOutOfMemory):
			return nil, fileError(src, ErrEvaluation,
				"evaluation stopped: the program needs more memory than there is (the evaluator ran out of memory)")
		}
		return nil, fileError(src, ErrEvaluation, "evaluation stopped: "+err.Error())
	}
	if opts.Trace != nil && len(res.Trace) > 0 {
		_, _ = opts.Trace.Write(res.Trace)
	}
	if res.Err != nil {
		return nil, res.Err.toError(src.RenderRoot)
	}
	return decodeOutput(src, res.Out, mopts)
}

// timeoutError is the cause of the evaluation's context when the timeout
// passed.
type timeoutError struct{}

func (*timeoutError) Error() string { return "timeout" }

// evaluateInProcess runs the job on its own goroutine so that ctx is
// honoured even though go-jsonnet cannot be interrupted: when it ends, the
// abandoned evaluation runs on in the background until it ends by itself.
func evaluateInProcess(ctx context.Context, job evalJob) (*evalResult, error) {
	done := make(chan *evalResult, 1) // buffered: an abandoned evaluation must not block forever
	go func() { done <- evaluate(job) }()
	select {
	case r := <-done:
		return r, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// recordingFormatter keeps the structured error go-jsonnet formats, for its
// location; the formatted text is go-jsonnet's own.
type recordingFormatter struct {
	gojsonnet.ErrorFormatter
	err error
}

func (r *recordingFormatter) Format(err error) string {
	r.err = err
	return r.ErrorFormatter.Format(err)
}

// withDefaults fills unset limits as package manifest does.
func withDefaults(o manifest.Options) manifest.Options {
	d := manifest.DefaultOptions()
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = d.MaxFileBytes
	}
	if o.MaxTotalBytes <= 0 {
		o.MaxTotalBytes = d.MaxTotalBytes
	}
	return o
}

// realDir returns dir as an absolute path with symlinks resolved.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return real, nil
}

// displayFunc returns how a path go-jsonnet reports is shown to users:
// relative to what the caller typed for the evaluated file, like package
// manifest shows the files of a directory.
func displayFunc(file, abs string) func(string) string {
	dir := filepath.Dir(abs)
	return func(p string) string {
		if p == abs {
			return file
		}
		if !filepath.IsAbs(p) {
			return p
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return p
		}
		return filepath.Join(filepath.Dir(file), rel)
	}
}

func fileError(src manifest.Source, kind error, msg string) *manifest.Error {
	return &manifest.Error{Source: src, Msg: msg, Err: kind}
}
