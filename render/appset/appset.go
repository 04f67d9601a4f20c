// Package appset expands an Argo CD ApplicationSet into the Applications
// its applicationset-controller would create: the list, git (directories,
// files), matrix and merge generators, fasttemplate or Go templates, the
// generators' own templates, selectors and templatePatch. Generators that need Argo
// CD's cluster state or a service (clusters, scmProvider, pullRequest,
// clusterDecisionResource, plugin) make the expansion Unpredictable.
//
// It is a package of its own because it is a pure function of the
// ApplicationSet and the repositories it reads, testable against Argo
// CD's own generator tests without reading a whole world.
package appset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"dario.cat/mergo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/truce-dev/truce/render"
)

// Options direct and bound an expansion.
type Options struct {
	// Repository returns the directory holding repoURL at revision, for
	// the git generator; its error is returned as it is (a
	// *render.Unpredictable when it cannot be cloned).
	Repository func(ctx context.Context, repoURL, revision string) (string, error)
	// MaxApplications bounds the Applications generated; 0 is 10,000.
	MaxApplications int
	// MaxEntries bounds the files and directories a git generator lists
	// in one repository; 0 is 100,000.
	MaxEntries int
	// MaxFileBytes bounds each file a git files generator reads; 0 is
	// 1 MiB.
	MaxFileBytes int64
	// MaxTotalBytes bounds what all git files generators of one
	// expansion read; 0 is 64 MiB.
	MaxTotalBytes int64
}

// TemplateTimeout bounds the template executions of one expansion: Go
// templates cannot be interrupted, and one that loops for ever is
// abandoned.
const TemplateTimeout = time.Minute

// resourcesFinalizer is what Argo CD adds to a generated Application that
// names no finalizer (v1alpha1.ResourcesFinalizerName).
const resourcesFinalizer = "resources-finalizer.argocd.argoproj.io"

// spec is the part of an ApplicationSet's spec the controller reads to
// generate Applications.
type spec struct {
	GoTemplate        bool             `json:"goTemplate"`
	GoTemplateOptions []string         `json:"goTemplateOptions"`
	Generators        []map[string]any `json:"generators"`
	Template          map[string]any   `json:"template"`
	TemplatePatch     *string          `json:"templatePatch"`
	SyncPolicy        struct {
		PreserveResourcesOnDeletion bool `json:"preserveResourcesOnDeletion"`
	} `json:"syncPolicy"`
}

// generatorKinds are the generators in the order Argo CD's
// ApplicationSetGenerator declares them, which is the order it runs two
// set in one entry (generators.GetRelevantGenerators).
var generatorKinds = []string{"list", "clusters", "git", "scmProvider", "clusterDecisionResource", "pullRequest", "plugin", "matrix", "merge"}

// unsupported says why truce does not run a generator.
var unsupported = map[string]string{
	"clusters":                "the clusters generator needs Argo CD's cluster secrets",
	"scmProvider":             "the scmProvider generator asks an SCM provider's API for repositories",
	"pullRequest":             "the pullRequest generator asks an SCM provider's API for pull requests",
	"clusterDecisionResource": "the clusterDecisionResource generator reads a resource of the cluster",
	"plugin":                  "the plugin generator asks a plugin service",
}

type expander struct {
	*engine
	opts Options
	// strictEngine resolves generator values (see strict).
	strictEngine *engine
	// read counts the bytes git files generators read.
	read int64
}

// Expand returns the Applications the ApplicationSet set generates, in
// generator order, as Argo CD's template.GenerateApplications and the
// controller's validation make them: each in the ApplicationSet's
// namespace. A generator truce does not run makes the error a
// *render.Unpredictable; Applications without a name or sharing one are
// an error, as Argo CD does not create them.
func Expand(ctx context.Context, set *unstructured.Unstructured, opts Options) ([]*unstructured.Unstructured, error) {
	if opts.MaxApplications <= 0 {
		opts.MaxApplications = 10_000
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 100_000
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = 1 << 20
	}
	if opts.MaxTotalBytes <= 0 {
		opts.MaxTotalBytes = 64 << 20
	}
	name := "ApplicationSet " + set.GetName()
	if set.GetNamespace() != "" {
		name = "ApplicationSet " + set.GetNamespace() + "/" + set.GetName()
	}
	raw, err := json.Marshal(set.Object["spec"])
	if err != nil {
		return nil, fmt.Errorf("reading the %s: %w", name, err)
	}
	var sp spec
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, fmt.Errorf("reading the %s: %w", name, err)
	}
	for _, g := range sp.Generators {
		if kind := unsupportedIn(g, 0); kind != "" {
			return nil, &render.Unpredictable{Subject: name, Reason: unsupported[kind] + "; its Applications are not checked"}
		}
	}
	tctx, cancel := context.WithTimeout(ctx, TemplateTimeout)
	defer cancel()
	e, err := newEngine(tctx, sp.GoTemplate, sp.GoTemplateOptions)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	x := &expander{engine: e, opts: opts}
	var apps []*unstructured.Unstructured
	for i, g := range sp.Generators {
		got, err := x.generate(ctx, g, sp)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.generators[%d]: %w", name, i, err)
		}
		for _, app := range got {
			app.SetNamespace(set.GetNamespace())
			apps = append(apps, app)
		}
		if len(apps) > opts.MaxApplications {
			return nil, fmt.Errorf("%s: more than %d Applications generated", name, opts.MaxApplications)
		}
	}
	if err := validate(name, apps); err != nil {
		return nil, err
	}
	return apps, nil
}

// validate refuses what the controller's validateGeneratedApplications
// refuses: an Application without a name, names generated twice.
func validate(name string, apps []*unstructured.Unstructured) error {
	seen := map[string]bool{}
	var dup []string
	for _, a := range apps {
		if a.GetName() == "" {
			return fmt.Errorf("%s generates an Application with no name; Argo CD creates none with it (a name must be set in the template's metadata.name or by templatePatch)", name)
		}
		if seen[a.GetName()] && !slices.Contains(dup, a.GetName()) {
			dup = append(dup, a.GetName())
		}
		seen[a.GetName()] = true
	}
	if len(dup) > 0 {
		sort.Strings(dup)
		return fmt.Errorf("%s generates Applications with duplicate names (%s); Argo CD reports the ApplicationSet in error", name, strings.Join(dup, ", "))
	}
	return nil
}

// generate runs one entry of spec.generators: the loop of
// template.GenerateApplications over what Transform returns.
func (x *expander) generate(ctx context.Context, g map[string]any, sp spec) ([]*unstructured.Unstructured, error) {
	results, err := x.transform(ctx, g, 0, nil)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range results {
		tmpl, err := mergeTemplate(r.template, sp.Template)
		if err != nil {
			return nil, err
		}
		for _, p := range r.params {
			app, err := x.application(tmpl, p, sp)
			if err != nil {
				return nil, err
			}
			out = append(out, app)
			if len(out) > x.opts.MaxApplications {
				return nil, fmt.Errorf("more than %d Applications generated", x.opts.MaxApplications)
			}
		}
	}
	return out, nil
}

// transformed is what one generator of an entry makes: its own template
// and its parameter sets (generators.TransformResult).
type transformed struct {
	template map[string]any
	params   []map[string]any
}

// transform mirrors generators.Transform: each generator set in the
// entry g makes parameters (the generator first interpolated with
// genParams when a matrix gives them), kept where the entry's selector
// matches. depth is 0 for spec.generators, 1 for a matrix's or merge's
// children, 2 below, where Argo CD's types have no matrix or merge.
func (x *expander) transform(ctx context.Context, g map[string]any, depth int, genParams map[string]any) ([]transformed, error) {
	var selector labels.Selector
	if s, ok := g["selector"]; ok && s != nil {
		var ls metav1.LabelSelector
		if err := remarshal(s, &ls); err != nil {
			return nil, fmt.Errorf("selector: %w", err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			// Argo CD's own conversion takes any value; truce's does not.
			return nil, &render.Unpredictable{Subject: "generator selector", Reason: fmt.Sprintf("truce cannot read it: %v", err)}
		}
		selector = sel
	}
	var out []transformed
	for _, kind := range generatorKinds {
		if g[kind] == nil || depth >= 2 && (kind == "matrix" || kind == "merge") {
			continue
		}
		spec := g[kind]
		if len(genParams) != 0 {
			got, err := x.interpolate(g, genParams)
			if err != nil {
				return nil, fmt.Errorf("failed to replace parameters in generator: %w", err)
			}
			spec = got[kind]
		}
		var r transformed
		var err error
		switch kind {
		case "list":
			var lg listGenerator
			if err := remarshal(spec, &lg); err != nil {
				return nil, fmt.Errorf("list: %w", err)
			}
			r.template = lg.Template
			r.params, err = x.listParams(lg)
		case "git":
			var gg gitGenerator
			if err := remarshal(spec, &gg); err != nil {
				return nil, fmt.Errorf("git: %w", err)
			}
			r.template = gg.Template
			r.params, err = x.gitParams(ctx, gg)
		case "matrix":
			var mg matrixGenerator
			if err := remarshal(spec, &mg); err != nil {
				return nil, fmt.Errorf("matrix: %w", err)
			}
			r.template = mg.Template
			r.params, err = x.matrixParams(ctx, mg, depth)
		case "merge":
			var mg mergeGenerator
			if err := remarshal(spec, &mg); err != nil {
				return nil, fmt.Errorf("merge: %w", err)
			}
			r.template = mg.Template
			r.params, err = x.mergeParams(ctx, mg, depth)
		default:
			return nil, &render.Unpredictable{Subject: kind + " generator", Reason: unsupported[kind]}
		}
		if err != nil {
			return nil, err
		}
		if selector != nil {
			kept := r.params[:0]
			for _, p := range r.params {
				if selector.Matches(labels.Set(flatStrings(p))) {
					kept = append(kept, p)
				}
			}
			r.params = kept
		}
		out = append(out, r)
	}
	return out, nil
}

// mergeTemplate fills what a generator's own template leaves empty from
// the ApplicationSet's template, with mergo as Argo CD's
// mergeGeneratorTemplate does.
func mergeTemplate(own, base map[string]any) (map[string]any, error) {
	dst := deepCopy(own)
	if dst == nil {
		dst = map[string]any{}
	}
	if err := mergo.Merge(&dst, deepCopy(base)); err != nil {
		return nil, fmt.Errorf("merging the generator's template: %w", err)
	}
	return dst, nil
}

// application renders one Application from a template and one parameter
// set (utils.Render.RenderTemplateParams, then templatePatch). With no
// parameters the template is taken as written, finalizer included.
func (x *expander) application(tmpl, params map[string]any, sp spec) (*unstructured.Unstructured, error) {
	app := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application"}
	meta := map[string]any{}
	if m, ok := tmpl["metadata"].(map[string]any); ok {
		// GetTempApplication takes these fields of the template only.
		for _, k := range []string{"name", "namespace", "labels", "annotations", "finalizers"} {
			if v, ok := m[k]; ok && v != nil {
				meta[k] = v
			}
		}
	}
	app["metadata"] = meta
	if s, ok := tmpl["spec"]; ok && s != nil {
		app["spec"] = s
	}
	if len(params) == 0 {
		return &unstructured.Unstructured{Object: deepCopy(app)}, nil
	}
	got, err := x.replaceDeep(app, params)
	if err != nil {
		return nil, err
	}
	app = got.(map[string]any)
	meta, _ = app["metadata"].(map[string]any)
	if f, _ := meta["finalizers"].([]any); len(f) == 0 && !sp.SyncPolicy.PreserveResourcesOnDeletion {
		meta["finalizers"] = []any{resourcesFinalizer}
	}
	if sp.TemplatePatch != nil {
		patch, err := x.replace(*sp.TemplatePatch, params)
		if err != nil {
			return nil, fmt.Errorf("error replacing values in templatePatch: %w", err)
		}
		if app, err = applyPatch(app, patch); err != nil {
			return nil, err
		}
	}
	return &unstructured.Unstructured{Object: app}, nil
}

// flatStrings is a parameter set as the labels a selector matches
// (generators.flattenParameters).
func flatStrings(p map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range flatten(normalize(p)) {
		out[k] = fmt.Sprintf("%v", v)
	}
	return out
}

// normalize turns the map[string]string values parameters hold into
// maps flatten walks (generators.normalizeMapForFlatten).
func normalize(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch v := v.(type) {
		case map[string]string:
			m := make(map[string]any, len(v))
			for ik, iv := range v {
				m[ik] = iv
			}
			out[k] = m
		case map[string]any:
			out[k] = normalize(v)
		default:
			out[k] = v
		}
	}
	return out
}

func remarshal(in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// deepCopy copies a JSON-like map.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return copyJSON(m).(map[string]any)
}

func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = copyJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = copyJSON(x)
		}
		return out
	}
	return v
}
