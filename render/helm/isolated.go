package helm

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/truce-dev/truce/render/isolate"
)

// engineJob is the name of the job that runs Helm's template engine in a
// worker process (see package isolate for why).
const engineJob = "helm.engine"

func init() { isolate.Register(engineJob, serveEngine) }

// engineRequest is what Helm's engine needs: the chart tree (after
// dependency processing) and the render values. Chart loading, values
// merging, schema validation and sorting the output stay in truce's
// process; only template execution, where a chart can recurse without
// end, crosses.
type engineRequest struct {
	Chart wireChart
	// Values are the render values without Capabilities.
	Values       []wireNode
	Capabilities *common.Capabilities
}

// wireChart is the part of a chart the engine reads: metadata (.Chart,
// library or not), templates, files (.Files) and subcharts.
type wireChart struct {
	Metadata *chart.Metadata
	// EmptyAnnotations tells an empty Annotations map from none, which gob
	// does not; .Chart.Annotations prints differently.
	EmptyAnnotations bool
	// ImportValues are the dependencies' import-values, sent as values:
	// they hold maps gob would need registered.
	ImportValues [][]wireNode
	Templates    []wireFile
	Files        []wireFile
	Dependencies []wireChart
}

type wireFile struct {
	Name string
	Data []byte
}

// renderTemplates runs Helm's engine on ch with values, in runner's worker
// when there is one, else (no runner, no worker, values the wire does not
// take) in process.
func renderTemplates(ctx context.Context, runner *isolate.Runner, ch *chart.Chart, values common.Values) (map[string]string, error) {
	if runner != nil {
		files, err := renderInWorker(ctx, runner, ch, values)
		if !errors.Is(err, errNotSent) && !errors.Is(err, isolate.ErrUnavailable) {
			return files, err
		}
	}
	var e engine.Engine
	return e.RenderWithContext(ctx, ch, values)
}

// errNotSent marks a job that could not be encoded.
var errNotSent = errors.New("not sent to the worker")

func renderInWorker(ctx context.Context, runner *isolate.Runner, ch *chart.Chart, values common.Values) (map[string]string, error) {
	payload, err := encodeEngineRequest(ch, values)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotSent, err)
	}
	out, err := runner.Do(ctx, engineJob, payload)
	if err != nil {
		return nil, workerError(err)
	}
	var files map[string]string
	if err := gob.NewDecoder(bytes.NewReader(out)).Decode(&files); err != nil {
		return nil, fmt.Errorf("reading the template worker's result: %w", err)
	}
	return files, nil
}

// workerError words a worker's failure for a chart's user. The engine's
// own errors (a *isolate.JobError) are Helm's text, as in process.
func workerError(err error) error {
	var we *isolate.WorkerError
	switch {
	case errors.Is(err, isolate.ErrOutOfStack):
		return fmt.Errorf("rendering stopped: templates recurse without end (the renderer %w)", isolate.ErrOutOfStack)
	case errors.Is(err, isolate.ErrOutOfMemory):
		return fmt.Errorf("rendering stopped: the templates need more memory than there is (the renderer %w)", isolate.ErrOutOfMemory)
	case errors.As(err, &we):
		return fmt.Errorf("rendering stopped: the renderer process died: %w", err)
	}
	return err
}

func encodeEngineRequest(ch *chart.Chart, values common.Values) ([]byte, error) {
	req := engineRequest{}
	var err error
	if req.Chart, err = toWire(ch, 0); err != nil {
		return nil, err
	}
	top := make(map[string]any, len(values))
	for k, v := range values {
		if k == "Capabilities" {
			caps, ok := v.(*common.Capabilities)
			if !ok {
				return nil, fmt.Errorf("capabilities are a %T", v)
			}
			req.Capabilities = caps
			continue
		}
		top[k] = v
	}
	if req.Values, err = encodeValues(top); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&req); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// maxChartDepth bounds subchart nesting on the wire; Helm's own loader
// has no bound, but real charts nest a few levels.
const maxChartDepth = 100

func toWire(c *chart.Chart, depth int) (wireChart, error) {
	if depth > maxChartDepth {
		return wireChart{}, fmt.Errorf("subcharts nested deeper than %d levels", maxChartDepth)
	}
	w := wireChart{Templates: wireFiles(c.Templates), Files: wireFiles(c.Files)}
	if md := c.Metadata; md != nil {
		cp := *md
		cp.Dependencies = make([]*chart.Dependency, len(md.Dependencies))
		w.ImportValues = make([][]wireNode, len(md.Dependencies))
		for i, d := range md.Dependencies {
			if d == nil {
				return wireChart{}, errors.New("nil dependency in Chart.yaml")
			}
			dc := *d
			nodes, err := encodeValues(d.ImportValues)
			if err != nil {
				return wireChart{}, err
			}
			w.ImportValues[i], dc.ImportValues = nodes, nil
			cp.Dependencies[i] = &dc
		}
		w.Metadata = &cp
		w.EmptyAnnotations = md.Annotations != nil && len(md.Annotations) == 0
	}
	for _, d := range c.Dependencies() {
		wd, err := toWire(d, depth+1)
		if err != nil {
			return wireChart{}, err
		}
		w.Dependencies = append(w.Dependencies, wd)
	}
	return w, nil
}

// wireFiles leaves out nil files, which the engine skips too.
func wireFiles(files []*common.File) []wireFile {
	out := make([]wireFile, 0, len(files))
	for _, f := range files {
		if f != nil {
			out = append(out, wireFile{Name: f.Name, Data: f.Data})
		}
	}
	return out
}

// serveEngine is the worker's side: Helm's engine, configured as
// installClientOnly.renderResources configures it.
func serveEngine(payload []byte) ([]byte, error) {
	ch, top, err := decodeEngineRequest(payload)
	if err != nil {
		return nil, err
	}
	var e engine.Engine
	files, err := e.RenderWithContext(context.Background(), ch, top)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(files); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func decodeEngineRequest(payload []byte) (*chart.Chart, common.Values, error) {
	var req engineRequest
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&req); err != nil {
		return nil, nil, fmt.Errorf("decoding the render job: %w", err)
	}
	ch, err := fromWire(req.Chart, 0)
	if err != nil {
		return nil, nil, err
	}
	v, err := decodeValues(req.Values)
	if err != nil {
		return nil, nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("malformed render job: values are a %T", v)
	}
	if req.Capabilities != nil {
		top["Capabilities"] = req.Capabilities
	}
	return ch, top, nil
}

func fromWire(w wireChart, depth int) (*chart.Chart, error) {
	if depth > maxChartDepth {
		return nil, fmt.Errorf("malformed render job: subcharts nested deeper than %d levels", maxChartDepth)
	}
	c := &chart.Chart{Metadata: w.Metadata, Templates: fromWireFiles(w.Templates), Files: fromWireFiles(w.Files)}
	if md := c.Metadata; md != nil {
		if w.EmptyAnnotations {
			md.Annotations = map[string]string{}
		}
		if len(w.ImportValues) != len(md.Dependencies) {
			return nil, errors.New("malformed render job: import-values do not match the dependencies")
		}
		for i, nodes := range w.ImportValues {
			if md.Dependencies[i] == nil {
				return nil, errors.New("malformed render job: nil dependency")
			}
			iv, err := decodeValues(nodes)
			if err != nil {
				return nil, err
			}
			s, ok := iv.([]any)
			if !ok {
				return nil, fmt.Errorf("malformed render job: import-values are a %T", iv)
			}
			md.Dependencies[i].ImportValues = s
		}
	}
	for _, wd := range w.Dependencies {
		d, err := fromWire(wd, depth+1)
		if err != nil {
			return nil, err
		}
		c.AddDependency(d)
	}
	return c, nil
}

func fromWireFiles(files []wireFile) []*common.File {
	out := make([]*common.File, len(files))
	for i, f := range files {
		out[i] = &common.File{Name: f.Name, Data: f.Data}
	}
	return out
}
