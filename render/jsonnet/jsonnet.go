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
// One hazard remains, in go-jsonnet and so in Argo CD too: a call marked
// tailstrict does not count against MaxStack but still grows the Go stack,
// so a tailstrict recursion of about a million calls exhausts Go's 1 GB
// stack limit, which is fatal to the whole process and cannot be
// recovered. Only evaluating in a separate process would contain it.
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
// go-jsonnet cannot be interrupted, so the evaluation runs in its own
// goroutine: when ctx is done or the timeout passes, Evaluate returns at
// once and the abandoned evaluation runs on in the background until it ends
// by itself, which for a hostile program may be when the process exits.
//
// Errors are *manifest.Error values (or an errors.Join of them), classified
// by ErrEvaluation, ErrTimeout, ErrOutput, manifest.ErrOutsideRoot (an
// import leaving Root), manifest.ErrTooLarge and the decoding errors of
// package manifest. Objects that decoded cleanly are returned alongside
// decoding errors, as manifest.Decode does.
func Evaluate(ctx context.Context, file string, opts Options) ([]manifest.Object, error) {
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

	imp := &importer{
		files:    &gojsonnet.FileImporter{JPaths: opts.LibPaths},
		root:     root,
		maxFile:  mopts.MaxFileBytes,
		maxTotal: mopts.MaxTotalBytes,
		display:  displayFunc(file, abs),
	}
	vm := gojsonnet.MakeVM()
	vm.MaxStack = MaxStack
	vm.Importer(imp)
	trace := opts.Trace
	if trace == nil {
		trace = io.Discard
	}
	vm.SetTraceOut(trace)
	rec := &recordingFormatter{ErrorFormatter: vm.ErrorFormatter}
	vm.ErrorFormatter = rec
	for _, v := range opts.ExtVars {
		if v.Code {
			vm.ExtCode(v.Name, v.Value)
		} else {
			vm.ExtVar(v.Name, v.Value)
		}
	}
	for _, v := range opts.TLAs {
		if v.Code {
			vm.TLACode(v.Name, v.Value)
		} else {
			vm.TLAVar(v.Name, v.Value)
		}
	}

	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	out, err := run(ctx, timeout, vm, abs)
	if err != nil {
		var timedOut *timeoutError
		switch {
		case errors.As(err, &timedOut):
			return nil, fileError(src, ErrTimeout, fmt.Sprintf(
				"evaluation did not finish within %v; the program loops or does too much work", timeout))
		case ctx.Err() != nil:
			return nil, fileError(src, err, "evaluation stopped: "+err.Error())
		}
		// Everything the VM touched is owned by the finished goroutine's
		// result now, so reading the importer's state is safe.
		if imp.refusal != nil {
			imp.refusal.Source.Renderer, imp.refusal.Source.RenderRoot = src.Renderer, src.RenderRoot
			return nil, imp.refusal
		}
		return nil, evaluationError(src, rec.err, err, imp.display)
	}
	if int64(len(out)) > mopts.MaxFileBytes {
		return nil, fileError(src, manifest.ErrTooLarge, fmt.Sprintf(
			"the Jsonnet output is %d bytes, larger than the %d-byte limit (MaxFileBytes)", len(out), mopts.MaxFileBytes))
	}
	return decodeOutput(src, out, mopts)
}

// timeoutError is the cause of run's context when the timeout passed.
type timeoutError struct{}

func (*timeoutError) Error() string { return "timeout" }

// run evaluates file in its own goroutine so that ctx and the timeout are
// honoured even though go-jsonnet cannot be interrupted.
func run(ctx context.Context, timeout time.Duration, vm *gojsonnet.VM, file string) (string, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, &timeoutError{})
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned evaluation must not block forever
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("go-jsonnet panicked: %v", r)}
			}
		}()
		out, err := vm.EvaluateFile(file)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
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
