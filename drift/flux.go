package drift

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/fluxcd/pkg/ssa/normalize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
)

// FluxFieldManager is kustomize-controller's field manager.
const FluxFieldManager = "kustomize-controller"

// FluxRule is one Flux ignore rule (a Kustomization's spec.ignore entry)
// and the name it is reported by.
type FluxRule struct {
	jsondiff.IgnoreRule
	Name string
}

// FluxRules turns the Flux rules of rules into Flux's own, each named by
// where it was written.
func FluxRules(rules []ignore.Rule) []FluxRule {
	var out []FluxRule
	for _, r := range rules {
		for _, fr := range ignore.FluxRules([]ignore.Rule{r}) {
			out = append(out, FluxRule{IgnoreRule: fr, Name: r.String()})
		}
	}
	return out
}

// Flux decides drift as kustomize-controller does: normalise the manifest
// (ssa's native-kind defaults), server-side apply it as a forced dry run,
// and compare the answer with the live object, labels and annotations
// included, metadata and status otherwise excluded, ignore rules stripped.
// The decision is Flux's own code (github.com/fluxcd/pkg/ssa
// ResourceManager.Diff) run against the cluster interface.
type Flux struct {
	Cluster cluster.Cluster
	// FieldManager defaults to FluxFieldManager.
	FieldManager string
	// Rules are the ignore rules. Their target selectors are compiled once
	// and reused while the rules stay the same; to change a rule's target,
	// set a new Selector (or new Rules) rather than editing it in place.
	Rules []FluxRule

	// selectors caches the compiled selectors of Rules (see
	// compiledSelectors).
	selectors atomic.Pointer[fluxSelectors]
}

// Name implements Strategy.
func (f *Flux) Name() string { return "flux" }

func (f *Flux) manager() *ssa.ResourceManager {
	owner := f.FieldManager
	if owner == "" {
		owner = FluxFieldManager
	}
	return ssa.NewResourceManager(cluster.ControllerClient(f.Cluster), nil, ssa.Owner{Field: owner, Group: "kustomize.toolkit.fluxcd.io"})
}

// Diff implements Strategy.
func (f *Flux) Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error) {
	out := newObject(f.Name(), desired)
	obj := desired.DeepCopy()
	if err := normalize.Unstructured(obj); err != nil {
		return nil, fmt.Errorf("normalising %s as Flux does: %w", cluster.RefOf(desired), err)
	}
	rm := f.manager()
	rules := make([]jsondiff.IgnoreRule, len(f.Rules))
	for i, r := range f.Rules {
		rules[i] = r.IgnoreRule
	}
	entry, existing, dryRun, err := rm.Diff(ctx, obj.DeepCopy(), ssa.DiffOptions{DriftIgnoreRules: rules})
	var dryRunErr *ssaerrors.DryRunErr
	if errors.As(err, &dryRunErr) {
		out.Status = Rejected
		out.Notes = append(out.Notes, dryRunErr.Error())
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("flux drift of %s: %w", cluster.RefOf(desired), err)
	}
	switch entry.Action {
	case ssa.CreatedAction:
		out.Status = Missing
		out.Notes = append(out.Notes, "not in the cluster: Flux creates it")
		return out, nil
	case ssa.SkippedAction:
		out.Status = Excluded
		return out, nil
	case ssa.ConfiguredAction:
		out.Desired, out.Live = fluxView(dryRun), fluxView(existing)
		out.Fields = FieldsBetween(out.Desired, out.Live)
	}
	matching := f.matchingRules(obj)
	if len(matching) > 0 {
		// Run Flux again without rules to show what they hide.
		entry, existing, dryRun, err := rm.Diff(ctx, obj.DeepCopy(), ssa.DiffOptions{})
		if err != nil {
			return nil, fmt.Errorf("flux drift of %s without ignore rules: %w", cluster.RefOf(desired), err)
		}
		if entry.Action == ssa.ConfiguredAction {
			shown := map[string]bool{}
			for _, fl := range out.Fields {
				shown[fl.Pointer] = true
			}
			for _, fl := range FieldsBetween(fluxView(dryRun), fluxView(existing)) {
				if shown[fl.Pointer] {
					continue
				}
				fl.IgnoredBy = ruleFor(matching, fl.Pointer)
				out.Fields = append(out.Fields, fl)
			}
		}
	}
	var live *unstructured.Unstructured
	if len(out.Fields) > 0 {
		if l, err := f.Cluster.Get(ctx, cluster.RefOf(obj)); err == nil {
			live = l
		}
	}
	// Flux's own verdict stands where the field listing places nothing.
	out.finish(live, entry.Action == ssa.ConfiguredAction)
	return out, nil
}

// fluxView is what Flux compares: labels, annotations and everything
// outside metadata and status, after its dry-run normalisation.
func fluxView(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	_ = normalize.DryRunUnstructured(c)
	return comparedPart(c)
}

// comparedPart cuts c (a copy) down to what Flux's and helm-controller's
// diffs compare: labels, annotations and everything outside metadata and
// status.
func comparedPart(c *unstructured.Unstructured) map[string]any {
	meta := map[string]any{}
	if l := c.GetLabels(); len(l) > 0 {
		meta["labels"] = toAny(l)
	}
	if a := c.GetAnnotations(); len(a) > 0 {
		meta["annotations"] = toAny(a)
	}
	delete(c.Object, "status")
	c.Object["metadata"] = meta
	return c.Object
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// matchingRules returns the rules whose target selects obj, in order: a
// rule without a target selects every object, one whose target does not
// compile none.
func (f *Flux) matchingRules(obj *unstructured.Unstructured) []FluxRule {
	rules := f.Rules
	var out []FluxRule
	for i, sel := range f.compiledSelectors(rules).selectors {
		if sel.err == nil && sel.regex.MatchUnstructured(obj) {
			out = append(out, rules[i])
		}
	}
	return out
}

// fluxSelectors are the compiled target selectors of a list of rules, one
// per rule, in order.
type fluxSelectors struct {
	selectors []compiledSelector
}

// compiledSelector is one rule's compiled target.
type compiledSelector struct {
	// from is the Selector it was compiled from.
	from *jsondiff.Selector
	// regex is nil for a nil selector, which matches every object.
	regex *jsondiff.SelectorRegex
	err   error
}

// compiledSelectors returns the compiled selectors of rules (f.Rules),
// compiling them on first use and again only when the rules changed since
// (other rules, or a rule with another Selector). Compiled selectors are
// never modified, so concurrent Diffs share them; two that race to compile
// both compile, and either result is kept.
func (f *Flux) compiledSelectors(rules []FluxRule) *fluxSelectors {
	if c := f.selectors.Load(); c != nil && c.compiledFrom(rules) {
		return c
	}
	c := &fluxSelectors{selectors: make([]compiledSelector, len(rules))}
	for i, r := range rules {
		c.selectors[i].from = r.Selector
		c.selectors[i].regex, c.selectors[i].err = jsondiff.NewSelectorRegex(r.Selector)
	}
	f.selectors.Store(c)
	return c
}

// compiledFrom reports whether c holds the selectors of rules.
func (c *fluxSelectors) compiledFrom(rules []FluxRule) bool {
	if len(rules) != len(c.selectors) {
		return false
	}
	for i := range rules {
		if rules[i].Selector != c.selectors[i].from {
			return false
		}
	}
	return true
}

// ruleFor names the first rule with a path that is pointer or a parent.
func ruleFor(rules []FluxRule, pointer string) string {
	for _, r := range rules {
		for _, p := range r.Paths {
			if p == "" || p == pointer || strings.HasPrefix(pointer, p+"/") {
				return r.Name
			}
		}
	}
	if len(rules) > 0 {
		return rules[0].Name
	}
	return ""
}
