package lint

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-openapi/jsonpointer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/schema"
)

// mutatorRules run the input's MutatingAdmissionPolicies offline, each on
// its own, on probe objects (the input's workloads and made-up objects of
// every kind they match): what a policy writes and reads is found by
// running it, not by reading its CEL. Mutating webhooks cannot be run
// offline and are not covered.
func mutatorRules() []Rule {
	return []Rule{
		{ID: "mutating-policy-not-idempotent", Severity: SeverityError,
			Summary: "A MutatingAdmissionPolicy changes its own result again", Check: checkNotIdempotent},
		{ID: "mutating-policies-compete", Severity: SeverityWarning,
			Summary: "Two MutatingAdmissionPolicies write different values to the same field", Check: checkCompeting},
		{ID: "mutating-policy-never-reinvoked-reads-others", Severity: SeverityWarning,
			Summary: "A MutatingAdmissionPolicy with reinvocationPolicy Never reads a field another one writes", Check: checkReinvocationNever},
	}
}

// unit is one MutatingAdmissionPolicy with its bindings, compiled alone.
type unit struct {
	name, object string
	source       string
	reinvocation string
	chain        *admission.Chain

	// onProbe remembers the unit's result on each probe's own body,
	// which every rule asks for (the reinvocation rule once per other
	// unit): a unit's chain answers the same review the same way.
	mu      sync.Mutex
	onProbe map[*byte]*admission.ReviewResult
}

// shared is what the admission-running rules of one Run compute once.
type shared struct {
	once   sync.Once
	units  []*unit
	probes []admission.Probe
	err    error
	done   func()
}

func (s *shared) release() {
	if s.done != nil {
		s.done()
	}
}

// mutatorSetup compiles every bound MutatingAdmissionPolicy of the input
// alone, with the rest of the input as its cluster, and returns the probes;
// once per Run. The returned func releases the chains when the rule was
// called outside Run.
func mutatorSetup(ctx context.Context, in *Input) ([]*unit, []admission.Probe, func(), error) {
	if in.shared == nil {
		return compileMutators(ctx, in)
	}
	s := in.shared
	s.once.Do(func() { s.units, s.probes, s.done, s.err = compileMutators(ctx, in) })
	return s.units, s.probes, func() {}, s.err
}

// admissionInput is the input sorted for the rules that run admission.
type admissionInput struct {
	// policies and bindings are the MutatingAdmissionPolicies and their
	// bindings.
	policies, bindings []manifest.Object
	// others are the objects that are not admission configuration and
	// have a name; samples those without one (generateName), which cannot
	// be part of a cluster state.
	others, samples []manifest.Object
	// base is the cluster the files are applied to, without admission
	// configuration: the others of a kind it serves (built in, or defined
	// by a CRD of the input; the repository's Namespaces, CRDs, parameter
	// objects and workloads, which the policies may read), and a Namespace,
	// with its name label, for each namespace they name that none of them
	// defines. An object whose CRD is elsewhere (an Argo CD Application)
	// cannot be part of it.
	base []*unstructured.Unstructured
}

// splitForAdmission sorts in for the rules that run admission.
func splitForAdmission(in *Input) (admissionInput, error) {
	var a admissionInput
	namespaces := sets.New[string]()
	for _, o := range in.Objects {
		switch o.Object.GetKind() {
		case "MutatingAdmissionPolicy":
			a.policies = append(a.policies, o)
		case "MutatingAdmissionPolicyBinding":
			a.bindings = append(a.bindings, o)
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
			"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		default:
			if o.Object.GetName() == "" {
				a.samples = append(a.samples, o)
				continue
			}
			if o.Object.GetKind() == "Namespace" {
				namespaces.Insert(o.Object.GetName())
			}
			a.others = append(a.others, o)
		}
	}
	served, err := servedKinds(a.others)
	if err != nil {
		return admissionInput{}, err
	}
	for _, o := range a.others {
		if !served(o.Object.GroupVersionKind()) {
			continue
		}
		a.base = append(a.base, o.Object)
		if ns := o.Object.GetNamespace(); ns != "" && !namespaces.Has(ns) {
			namespaces.Insert(ns)
			n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
			n.SetName(ns)
			n.SetLabels(map[string]string{"kubernetes.io/metadata.name": ns})
			a.base = append(a.base, n)
		}
	}
	return a, nil
}

// servedKinds reports which kinds a cluster holding objs serves: the
// built-in ones and those of the CRDs among objs.
func servedKinds(objs []manifest.Object) (func(k8sschema.GroupVersionKind) bool, error) {
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if isKind(o, "apiextensions.k8s.io", "CustomResourceDefinition") {
			crds = append(crds, o.Object)
		}
	}
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("loading the built-in kinds: %w", err)
	}
	state, err := admission.NewState(crds...)
	if err != nil {
		return nil, err
	}
	defined, err := state.CRDs()
	if err != nil {
		return nil, err
	}
	for _, crd := range defined {
		if err := reg.AddCRD(crd); err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %s: %w", crd.Name, err)
		}
	}
	return func(gvk k8sschema.GroupVersionKind) bool {
		_, err := reg.ForKind(gvk)
		return err == nil
	}, nil
}

// bound returns the bindings of policy p.
func (a admissionInput) bound(p manifest.Object) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, b := range a.bindings {
		if name, _, _ := unstructured.NestedString(b.Object.Object, "spec", "policyName"); name == p.Object.GetName() {
			out = append(out, b.Object)
		}
	}
	return out
}

// compileMutators does mutatorSetup's work. A policy that does not compile
// is skipped: the API server refuses it, which is not these rules' to say.
func compileMutators(ctx context.Context, in *Input) ([]*unit, []admission.Probe, func(), error) {
	a, err := splitForAdmission(in)
	if err != nil {
		return nil, nil, func() {}, err
	}
	if len(a.policies) == 0 {
		return nil, nil, func() {}, nil
	}
	base := a.base
	var units []*unit
	closeAll := func() {
		for _, u := range units {
			u.chain.Close()
		}
	}
	all := append([]*unstructured.Unstructured{}, base...)
	for _, p := range a.policies {
		bindings := a.bound(p)
		if len(bindings) == 0 {
			continue
		}
		all = append(append(all, bindings...), p.Object)
		// A unit reviews probes: the repository's workloads are not read.
		objs := admission.ReviewObjects(append(append(append([]*unstructured.Unstructured{}, base...), p.Object), bindings...))
		state, err := admission.NewState(objs...)
		if err != nil {
			continue
		}
		chain, err := admission.NewChain(ctx, state, in.chainOptions())
		if err != nil {
			continue
		}
		reinvocation, _, _ := unstructured.NestedString(p.Object.Object, "spec", "reinvocationPolicy")
		units = append(units, &unit{name: p.Object.GetName(), object: objectName(p.Object), source: sourceOf(p), reinvocation: reinvocation, chain: chain})
	}
	state, err := admission.NewState(all...)
	if err != nil {
		closeAll()
		return nil, nil, func() {}, fmt.Errorf("building the cluster of the mutating policies: %w", err)
	}
	return units, admission.Probes(state, append(a.others, a.samples...)), closeAll, nil
}

// rememberProbes is off in the test comparing the rules' findings with
// and without remembered results.
var rememberProbes = true

// mutate runs u on body; nil when it does not change it. Callers must not
// change the result.
func (u *unit) mutate(ctx context.Context, p admission.Probe, body []byte) (*admission.ReviewResult, error) {
	if !rememberProbes || len(body) == 0 || len(p.Body) == 0 || &body[0] != &p.Body[0] || len(body) != len(p.Body) {
		return u.review(ctx, p, body)
	}
	// The probes are shared by every rule and never changed: the body's
	// address names the probe.
	key := &p.Body[0]
	u.mu.Lock()
	res, ok := u.onProbe[key]
	u.mu.Unlock()
	if ok {
		return res, nil
	}
	res, err := u.review(ctx, p, body)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	if u.onProbe == nil {
		u.onProbe = map[*byte]*admission.ReviewResult{}
	}
	u.onProbe[key] = res
	u.mu.Unlock()
	return res, nil
}

// review runs u on body; nil when it does not change it.
func (u *unit) review(ctx context.Context, p admission.Probe, body []byte) (*admission.ReviewResult, error) {
	res, err := u.chain.Mutate(ctx, p.Review(body))
	if err != nil || !res.Allowed || res.Object == nil || len(res.Changes) == 0 {
		return nil, err
	}
	return res, nil
}

func checkNotIdempotent(ctx context.Context, in *Input) ([]Finding, error) {
	units, probes, done, err := mutatorSetup(ctx, in)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []Finding
	for _, u := range units {
		for _, p := range probes {
			first, err := u.mutate(ctx, p, p.Body)
			if err != nil || first == nil {
				continue
			}
			second, err := u.mutate(ctx, p, first.Object)
			if err != nil || second == nil {
				continue
			}
			out = append(out, Finding{
				Rule: "mutating-policy-not-idempotent", Severity: SeverityError, Source: u.source, Object: u.object,
				Message: fmt.Sprintf("applied to its own result for %s, it changes %s again", p.Source, strings.Join(paths(second.Changes), ", ")),
				Why: "The API server reinvokes mutations (reinvocationPolicy IfNeeded) and GitOps tools re-apply objects: a mutation that is not " +
					"idempotent appends or rewrites again on every pass, and the object never settles.",
				Fix: "make the mutation leave its own result unchanged: guard appends with a matchCondition (e.g. !object.spec.containers.exists(c, c.name == 'x')), set values instead of adding to them",
			})
			break
		}
	}
	return out, nil
}

// written is the value each changed path has after a mutation.
func written(res *admission.ReviewResult) map[string]any {
	var obj map[string]any
	if json.Unmarshal(res.Object, &obj) != nil {
		return nil
	}
	out := map[string]any{}
	for _, c := range res.Changes {
		out[c.Path] = valueAt(obj, c.Path)
	}
	return out
}

func checkCompeting(ctx context.Context, in *Input) ([]Finding, error) {
	units, probes, done, err := mutatorSetup(ctx, in)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []Finding
	reported := map[[2]string]bool{}
	for _, p := range probes {
		alone := make([]*admission.ReviewResult, len(units))
		for i, u := range units {
			if res, err := u.mutate(ctx, p, p.Body); err == nil {
				alone[i] = res
			}
		}
		for i := range units {
			for j := i + 1; j < len(units); j++ {
				a, b := units[i], units[j]
				if alone[i] == nil || alone[j] == nil || reported[[2]string{a.name, b.name}] {
					continue
				}
				// Order matters when a after b and b after a end apart.
				ab := after(ctx, a, p, alone[j].Object)
				ba := after(ctx, b, p, alone[i].Object)
				path, va, vb, ok := firstDifference(ab, ba)
				if !ok {
					continue
				}
				reported[[2]string{a.name, b.name}] = true
				out = append(out, Finding{
					Rule: "mutating-policies-compete", Severity: SeverityWarning, Source: a.source, Object: a.object,
					Message: fmt.Sprintf("on %s, the result depends on the order of this policy and %s: %s is %s when this one runs last, %s when the other does",
						p.Source, b.object, path, brief(va), brief(vb)),
					Why: "Admission does not promise an order between mutators: the stored value depends on which runs last, " +
						"and a GitOps tool comparing with Git sees one or the other.",
					Fix: fmt.Sprintf("let one policy own %s: narrow one policy's matchConstraints or bindings, or make both agree on the value", path),
				})
			}
		}
	}
	return out, nil
}

// after returns body once u has run on it (body itself when u changes
// nothing), decoded.
func after(ctx context.Context, u *unit, p admission.Probe, body []byte) map[string]any {
	if res, err := u.mutate(ctx, p, body); err == nil && res != nil {
		body = res.Object
	}
	var obj map[string]any
	_ = json.Unmarshal(body, &obj)
	return obj
}

// firstDifference returns the first path (in order) where a and b differ.
func firstDifference(a, b map[string]any) (string, any, any, bool) {
	paths := admission.Diff(a, b)
	if len(paths) == 0 {
		return "", nil, nil, false
	}
	sort.Strings(paths)
	return paths[0], valueAt(a, paths[0]), valueAt(b, paths[0]), true
}

func valueAt(obj map[string]any, path string) any {
	p, err := jsonpointer.New(path)
	if err != nil {
		return nil
	}
	v, _, _ := p.Get(obj)
	return v
}

func checkReinvocationNever(ctx context.Context, in *Input) ([]Finding, error) {
	units, probes, done, err := mutatorSetup(ctx, in)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []Finding
	reported := map[string]bool{}
	for _, a := range units {
		if a.reinvocation != "Never" || reported[a.name] {
			continue
		}
	probes:
		for _, p := range probes {
			alone, err := a.mutate(ctx, p, p.Body)
			if err != nil || alone == nil {
				// Nothing written on this probe: nothing to depend on.
				continue
			}
			for _, b := range units {
				if b == a {
					continue
				}
				other, err := b.mutate(ctx, p, p.Body)
				if err != nil || other == nil {
					continue
				}
				if !dependsOn(alone, other, after(ctx, a, p, other.Object)) {
					continue
				}
				reported[a.name] = true
				out = append(out, Finding{
					Rule: "mutating-policy-never-reinvoked-reads-others", Severity: SeverityWarning, Source: a.source, Object: a.object,
					Message: fmt.Sprintf("on %s, what it writes depends on %s, which %s writes; with reinvocationPolicy Never it is not run again after that write",
						p.Source, strings.Join(paths(other.Changes), ", "), b.object),
					Why: "Mutators run in an unspecified order: when the other one runs later, this policy's result was computed from a value " +
						"that is no longer there, and the stored object depends on the order.",
					Fix: "set reinvocationPolicy: IfNeeded (the policy must then be idempotent), or make it independent of the other policy's fields",
				})
				break probes
			}
		}
	}
	return out, nil
}

// dependsOn reports whether a policy's writes (alone: on the probe) come
// out differently when it runs after other (final: the object then), at
// the paths the policy writes and other does not: it read what other wrote.
func dependsOn(alone, other *admission.ReviewResult, final map[string]any) bool {
	theirs := written(other)
	for path, v := range written(alone) {
		if _, ok := theirs[path]; ok {
			continue
		}
		if !jsonEqual(v, valueAt(final, path)) {
			return true
		}
	}
	return false
}

func paths(cs []admission.Change) []string {
	seen := sets.New[string]()
	var out []string
	for _, c := range cs {
		if !seen.Has(c.Path) {
			seen.Insert(c.Path)
			out = append(out, c.Path)
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func brief(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
