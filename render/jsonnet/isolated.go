package jsonnet

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"

	gojsonnet "github.com/google/go-jsonnet"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/isolate"
)

// evaluateJob is the name of the job that evaluates a Jsonnet file in a
// worker process.
const evaluateJob = "jsonnet.evaluate"

func init() { isolate.Register(evaluateJob, serveEvaluate) }

// evalJob is one evaluation, with every path absolute: the worker reads
// the files itself.
type evalJob struct {
	// File is the file as the caller named it, for messages; Abs is where
	// it is.
	File, Abs string
	// Root is the directory imports must stay in, symlinks resolved.
	Root          string
	LibPaths      []string
	ExtVars, TLAs []Var
	MaxFileBytes  int64
	MaxTotalBytes int64
}

// evalResult is the program's output, or the *manifest.Error describing
// why there is none, and what it traced.
type evalResult struct {
	Out   string
	Trace []byte
	Err   *wireError
}

// wireError is a *manifest.Error of this package, with its classification
// named so that it survives the trip from the worker.
type wireError struct {
	File string
	Line int
	Msg  string
	Kind string
}

// errorKinds are the classifications evaluate reports.
var errorKinds = map[string]error{
	"evaluation":   ErrEvaluation,
	"output":       ErrOutput,
	"outside-root": manifest.ErrOutsideRoot,
	"too-large":    manifest.ErrTooLarge,
	"invalid":      fs.ErrInvalid,
}

func toWireError(e *manifest.Error) *wireError {
	w := &wireError{File: e.Source.File, Line: e.Source.Line, Msg: e.Msg, Kind: "evaluation"}
	for name, kind := range errorKinds {
		if errors.Is(e.Err, kind) {
			w.Kind = name
		}
	}
	return w
}

// toError rebuilds the error of an evaluation of the file root.
func (w *wireError) toError(root string) *manifest.Error {
	kind := errorKinds[w.Kind]
	if kind == nil {
		kind = ErrEvaluation
	}
	return &manifest.Error{
		Source: manifest.Source{File: w.File, Line: w.Line, Renderer: manifest.RendererJsonnet, RenderRoot: root},
		Msg:    w.Msg,
		Err:    kind,
	}
}

// evaluateIsolated runs job in runner's worker; isolate.ErrUnavailable
// means it has none.
func evaluateIsolated(ctx context.Context, runner *isolate.Runner, job evalJob) (*evalResult, error) {
	if runner == nil {
		return nil, isolate.ErrUnavailable
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&job); err != nil {
		return nil, fmt.Errorf("%w: encoding the job: %v", isolate.ErrUnavailable, err)
	}
	out, err := runner.Do(ctx, evaluateJob, b.Bytes())
	if err != nil {
		return nil, err
	}
	var res evalResult
	if err := gob.NewDecoder(bytes.NewReader(out)).Decode(&res); err != nil {
		return nil, fmt.Errorf("reading the evaluator's result: %w", err)
	}
	return &res, nil
}

// serveEvaluate is the worker's side of evaluateIsolated.
func serveEvaluate(payload []byte) ([]byte, error) {
	var job evalJob
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&job); err != nil {
		return nil, fmt.Errorf("decoding the Jsonnet job: %w", err)
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(evaluate(job)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// evaluate runs go-jsonnet on job: the VM as Argo CD configures it, the
// confined importer, the output size limit. It returns when the program
// ends, whenever that is.
func evaluate(job evalJob) (res *evalResult) {
	src := manifest.Source{File: job.File, Renderer: manifest.RendererJsonnet, RenderRoot: job.File}
	imp := &importer{
		files:    &gojsonnet.FileImporter{JPaths: job.LibPaths},
		root:     job.Root,
		maxFile:  job.MaxFileBytes,
		maxTotal: job.MaxTotalBytes,
		display:  displayFunc(job.File, job.Abs),
	}
	vm := gojsonnet.MakeVM()
	vm.MaxStack = MaxStack
	vm.Importer(imp)
	trace := &limitedBuffer{max: job.MaxFileBytes}
	vm.SetTraceOut(trace)
	rec := &recordingFormatter{ErrorFormatter: vm.ErrorFormatter}
	vm.ErrorFormatter = rec
	for _, v := range job.ExtVars {
		if v.Code {
			vm.ExtCode(v.Name, v.Value)
		} else {
			vm.ExtVar(v.Name, v.Value)
		}
	}
	for _, v := range job.TLAs {
		if v.Code {
			vm.TLACode(v.Name, v.Value)
		} else {
			vm.TLAVar(v.Name, v.Value)
		}
	}

	defer func() {
		if r := recover(); r != nil {
			res = &evalResult{Err: toWireError(fileError(src, ErrEvaluation, fmt.Sprintf("go-jsonnet panicked: %v", r)))}
		}
	}()
	out, err := vm.EvaluateFile(job.Abs)
	res = &evalResult{Trace: trace.buf.Bytes()}
	switch {
	case err != nil && imp.refusal != nil:
		imp.refusal.Source.Renderer, imp.refusal.Source.RenderRoot = src.Renderer, src.RenderRoot
		res.Err = toWireError(imp.refusal)
	case err != nil:
		res.Err = toWireError(evaluationError(src, rec.err, err, imp.display))
	case int64(len(out)) > job.MaxFileBytes:
		res.Err = toWireError(fileError(src, manifest.ErrTooLarge, fmt.Sprintf(
			"the Jsonnet output is %d bytes, larger than the %d-byte limit (MaxFileBytes)", len(out), job.MaxFileBytes)))
	default:
		res.Out = out
	}
	return res
}

// limitedBuffer keeps the first max bytes of std.trace output.
type limitedBuffer struct {
	buf bytes.Buffer
	max int64
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - int64(b.buf.Len()); room > 0 {
		b.buf.Write(p[:min(room, int64(len(p)))])
	}
	return len(p), nil
}
