package helm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/isolate"
)

// RenderTimeout bounds one Render when ctx has no earlier deadline.
const RenderTimeout = 2 * time.Minute

// Release is what helm template is told about the release.
type Release struct {
	// Name is the release name (Argo CD: helm.releaseName, else the
	// Application's name; Flux: see FluxReleaseName).
	Name string
	// Namespace is .Release.Namespace; empty is "default", as helm
	// template without a kubeconfig.
	Namespace string
	// IncludeCRDs puts the crds/ directories' objects first in Objects,
	// as --include-crds (Argo CD passes it unless helm.skipCrds).
	IncludeCRDs bool
	// SkipTests leaves test hooks out of Hooks, as --skip-tests.
	SkipTests bool
	// IsUpgrade sets .Release.IsUpgrade instead of .Release.IsInstall.
	IsUpgrade bool
	// SkipSchemaValidation skips values.schema.json, as
	// --skip-schema-validation (Argo CD's helm.skipSchemaValidation).
	SkipSchemaValidation bool
}

// Rendered is what a chart renders to, decoded.
type Rendered struct {
	// Objects are the release manifest in the order helm template prints
	// it: the crds/ objects first when Release.IncludeCRDs, then the
	// templates' objects in Helm's install order.
	Objects []manifest.Object
	// Hooks are the objects Helm runs as hooks (helm.sh/hook annotation),
	// in Helm's order, which helm template prints after Objects. Argo CD
	// turns them into its own hooks; helm-controller runs them outside the
	// release, so they are not part of its drift detection.
	Hooks []manifest.Object
	// CRDs are the objects of the chart's and its subcharts' crds/
	// directories, always: with Release.IncludeCRDs they also lead Objects,
	// without it they are what Helm (and helm-controller's CRD policy)
	// would install before the release.
	CRDs []manifest.Object
}

// Render renders ch with values as helm template does (Helm's install
// action with a client-only dry run, mirrored step by step in install.go
// without linking pkg/action): opts.KubeVersion (default
// render.KubeVersion) as .Capabilities.KubeVersion, Helm's built-in API
// versions plus opts.APIVersions as .Capabilities.APIVersions, lookup
// returning nothing. values are the user-supplied values (ArgoValues.Merge,
// FluxValues); the chart's own values.yaml is coalesced by Helm.
//
// Every object's Source names the template on disk it came from (under
// ch.Dir; subcharts under charts/), with Line 0, Renderer
// manifest.RendererHelm and RenderRoot ch.Dir. Like manifest.Decode, Render
// returns the objects that decoded cleanly together with the errors of
// those that did not.
//
// Helm's template engine runs in a worker process (package isolate), so
// that a chart whose templates recurse without end (tpl evaluating
// itself) fails with an error naming it instead of aborting truce when the
// stack runs out. Render returns when ctx ends or RenderTimeout passes,
// with an error naming the chart, and the worker is killed. Without a
// worker (an executable that does not call isolate.Main) the engine runs
// in process as before: a template that never ends then keeps a goroutine
// busy until the process exits, and a recursion without end aborts it.
func Render(ctx context.Context, ch *Chart, rel Release, values map[string]any, opts render.Options) (*Rendered, error) {
	return renderWith(ctx, isolate.Default(), ch, rel, values, opts)
}

// renderWith is Render with the engine in runner's workers, or in process
// when runner is nil.
func renderWith(ctx context.Context, runner *isolate.Runner, ch *Chart, rel Release, values map[string]any, opts render.Options) (*Rendered, error) {
	opts = opts.WithDefaults()
	kubeVersion, err := common.ParseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: invalid Kubernetes version %q: %w", ch, opts.KubeVersion, err)
	}
	// pkg/cmd/install.go checkIfInstallable, before the install action.
	switch ch.Chart.Metadata.Type {
	case "", "application":
	default:
		return nil, fmt.Errorf("rendering %s: %s charts are not installable", ch, ch.Chart.Metadata.Type)
	}
	if rel.Namespace == "" {
		rel.Namespace = "default"
	}
	vals := copyValues(values)
	if vals == nil {
		vals = map[string]any{}
	}

	install := &installClientOnly{
		ReleaseName:          rel.Name,
		Namespace:            rel.Namespace,
		KubeVersion:          kubeVersion,
		APIVersions:          common.VersionSet(opts.APIVersions),
		IncludeCRDs:          rel.IncludeCRDs,
		IsUpgrade:            rel.IsUpgrade,
		SkipSchemaValidation: rel.SkipSchemaValidation,
		Runner:               runner,
	}
	out, err := runInstall(ctx, install, cloneChart(ch.Chart), vals, ch)
	if err != nil {
		return nil, err
	}
	return decodeRelease(ch, out, rel, opts.Manifest)
}

// runInstall renders on its own goroutine so that a chart that never
// finishes rendering does not hang the caller.
func runInstall(ctx context.Context, install *installClientOnly, c *chart.Chart, vals map[string]any, ch *Chart) (*templated, error) {
	ctx, cancel := context.WithTimeout(ctx, RenderTimeout)
	defer cancel()
	type result struct {
		out *templated
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("panic in Helm: %v", r)}
			}
		}()
		out, err := install.run(ctx, c, vals)
		done <- result{out: out, err: err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("rendering %s: %w", ch, r.err)
		}
		return r.out, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("rendering %s: templates did not finish in time; a template may loop forever: %w", ch, ctx.Err())
		}
		return nil, fmt.Errorf("rendering %s: %w", ch, ctx.Err())
	}
}

// isTestHook is helm template's --skip-tests test.
func isTestHook(h *release.Hook) bool { return slices.Contains(h.Events, release.HookTest) }
