package lint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/engine/gatekeeper"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/schema"
)

// Rule ids of the Gatekeeper mutator rules.
const (
	RuleGatekeeperMutationFails    = "gatekeeper-mutation-fails"
	RuleGatekeeperMutatorsConflict = "gatekeeper-mutators-conflict"
	RuleGatekeeperMutatorsCompete  = "gatekeeper-mutators-compete"
	whyGatekeeperMutationFails     = "Gatekeeper's mutation webhook answers a failed mutation with an error response (admission.Errored, code 500, pkg/webhook/mutation.go), which kube-apiserver turns into a denial whatever the webhook's failurePolicy: every write of such an object is rejected. Gatekeeper runs its mutators again and again until the object stops changing, and gives up with \"mutation not converging\" after one round more than it has mutators."
	fixGatekeeperMutationFails     = "Make the mutators agree: one writer per field, a location that matches the field's type (a list is addressed with [key: value], not as an object), pathTests that keep a mutator from undoing another's result."
	whyGatekeeperMutatorsConflict  = "Gatekeeper infers a schema from each mutator's location (an object, a keyed list, a set); two mutators that disagree on the type of a field are both marked conflicting, and Gatekeeper applies neither of them, to any object, until the conflict is removed. The mutators are accepted by the API server; only their status says so."
	fixGatekeeperMutatorsConflict  = "Give the field one shape in every mutator's location: a list of containers is spec.containers[name: *], never spec.containers.image."
	whyGatekeeperMutatorsCompete   = "Gatekeeper applies its mutators in the order of (group, kind, namespace, name), each round, until nothing changes: on every write the later one overwrites what the earlier one set, so the earlier one never has an effect, and renaming either mutator silently flips which value wins."
	fixGatekeeperMutatorsCompete   = "Keep one mutator per field, or add a pathTests MustNotExist condition (or a narrower match) so that they apply to different objects."
	gatekeeperProbeNamespace       = "default"
)

// uuidPattern matches the mutation UUID in Gatekeeper's errors, which
// differs on every run.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// jsonText is v as JSON, for messages.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func gatekeeperRules() []Rule {
	return []Rule{
		{ID: RuleGatekeeperMutationFails, Severity: SeverityError,
			Summary: "Gatekeeper's mutators fail on an object (a mutator errors, or they do not converge): its webhook denies the write",
			Check:   checkGatekeeperMutationFails},
		{ID: RuleGatekeeperMutatorsConflict, Severity: SeverityError,
			Summary: "Gatekeeper mutators whose locations disagree on a field's type: Gatekeeper applies none of them",
			Check:   checkGatekeeperMutatorsConflict},
		{ID: RuleGatekeeperMutatorsCompete, Severity: SeverityWarning,
			Summary: "Two Gatekeeper mutators set the same field to different values: the later one in Gatekeeper's order always wins",
			Check:   checkGatekeeperMutatorsCompete},
	}
}

// gatekeeperInput is the input's Gatekeeper mutators, built by
// Gatekeeper's own constructors, and the objects to try them on.
type gatekeeperInput struct {
	muts *gatekeeper.Mutators
	// run is muts; the tests put a fake in its place for what real
	// mutators cannot do (not converging).
	run    gatekeeperRunner
	objs   []manifest.Object // the mutators, as Mutators.Objects
	probes []gatekeeperProbe
}

// gatekeeperRunner runs Gatekeeper's mutation: all mutators, or one alone.
type gatekeeperRunner interface {
	Mutate(ctx context.Context, obj *unstructured.Unstructured, ns *corev1.Namespace) (*unstructured.Unstructured, error)
	MutateAlone(ctx context.Context, i int, obj *unstructured.Unstructured, ns *corev1.Namespace) (*unstructured.Unstructured, error)
}

// gatekeeperProbe is an object the mutators are tried on.
type gatekeeperProbe struct {
	what string // "Deployment apps/web (file:line)" or "a probe Pod in namespace default"
	obj  *unstructured.Unstructured
	ns   *corev1.Namespace
}

// gatekeeperSetup builds the input's mutators and probes: the input's own
// objects of the kinds the mutators apply to, and a small object of each
// such kind that the input has none of. Mutators Gatekeeper cannot build
// are left out: its API answers them, not these rules.
func gatekeeperSetup(in *Input) (*gatekeeperInput, error) {
	var mutObjs []*unstructured.Unstructured
	var mutSources []manifest.Object
	for _, o := range in.Objects {
		if gatekeeper.IsMutator(o.Object) {
			mutObjs = append(mutObjs, o.Object)
			mutSources = append(mutSources, o)
		}
	}
	if len(mutObjs) == 0 {
		return nil, nil
	}
	muts, _ := gatekeeper.NewMutators(mutObjs)
	g := &gatekeeperInput{muts: muts, run: muts}
	for _, m := range muts.Objects {
		for _, o := range mutSources {
			if o.Object == m {
				g.objs = append(g.objs, o)
			}
		}
	}
	kinds := map[k8sschema.GroupVersionKind]bool{}
	for i := range muts.Objects {
		for _, gvk := range muts.ApplyTo(i) {
			kinds[gvk] = true
		}
	}
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("loading the built-in kinds: %w", err)
	}
	namespaces := map[string]*corev1.Namespace{}
	for _, o := range in.Objects {
		if isKind(o, "", "Namespace") {
			ns := &corev1.Namespace{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, ns); err != nil {
				return nil, fmt.Errorf("%s: decoding Namespace: %w", where(o), err)
			}
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
			namespaces[ns.Name] = ns
		}
	}
	nsFor := func(name string) *corev1.Namespace {
		if ns, ok := namespaces[name]; ok {
			return ns
		}
		ns := &corev1.Namespace{}
		ns.Name = name
		ns.Labels = map[string]string{corev1.LabelMetadataName: name}
		return ns
	}
	covered := map[k8sschema.GroupVersionKind]bool{}
	for _, o := range in.Objects {
		gvk := o.Object.GroupVersionKind()
		if !kinds[gvk] || o.Object.GetName() == "" {
			continue
		}
		covered[gvk] = true
		p := gatekeeperProbe{what: fmt.Sprintf("%s (%s)", objectName(o.Object), where(o)), obj: o.Object}
		if r, err := reg.ForKind(gvk); err != nil || r.Namespaced {
			ns := o.Object.GetNamespace()
			if ns == "" {
				ns = gatekeeperProbeNamespace
			}
			p.obj = o.Object.DeepCopy()
			p.obj.SetNamespace(ns)
			p.ns = nsFor(ns)
		}
		g.probes = append(g.probes, p)
	}
	var missing []k8sschema.GroupVersionKind
	for gvk := range kinds {
		if !covered[gvk] {
			missing = append(missing, gvk)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].String() < missing[j].String() })
	for _, gvk := range missing {
		u := gatekeeperProbeObject(gvk)
		p := gatekeeperProbe{what: "a probe " + gvk.Kind, obj: u}
		if r, err := reg.ForKind(gvk); err != nil || r.Namespaced {
			u.SetNamespace(gatekeeperProbeNamespace)
			p.ns = nsFor(gatekeeperProbeNamespace)
			p.what += " in namespace " + gatekeeperProbeNamespace
		}
		g.probes = append(g.probes, p)
	}
	return g, nil
}

// gatekeeperProbeObject is a small object of kind gvk: pods and pod
// templates carry a container, what most mutators touch.
func gatekeeperProbeObject(gvk k8sschema.GroupVersionKind) *unstructured.Unstructured {
	podSpec := func() map[string]any {
		return map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27"}}}
	}
	labels := map[string]any{"app": "truce-probe"}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetName("truce-probe")
	u.SetLabels(map[string]string{"app": "truce-probe"})
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		u.Object["spec"] = podSpec()
	case gvk.Group == "apps" || (gvk.Group == "batch" && gvk.Kind == "Job"):
		u.Object["spec"] = map[string]any{
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": podSpec()},
		}
	case gvk.Group == "batch" && gvk.Kind == "CronJob":
		u.Object["spec"] = map[string]any{"schedule": "@daily", "jobTemplate": map[string]any{"spec": map[string]any{
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": podSpec()},
		}}}
	}
	return u
}

// mutatorIndex finds the mutator a Gatekeeper error names
// ("Kind.mutations.gatekeeper.sh /name"), or -1.
func (g *gatekeeperInput) mutatorIndex(msg string) int {
	for i, m := range g.muts.Objects {
		if strings.Contains(msg, m.GetKind()+".mutations.gatekeeper.sh /"+m.GetName()+" ") {
			return i
		}
	}
	return -1
}

// checkGatekeeperMutationFails runs every mutator together on every probe,
// as Gatekeeper's webhook does, and reports the failures: on the mutator
// the error names, or, when they do not converge, on the first of the
// mutators that change the probe, naming the others.
func checkGatekeeperMutationFails(ctx context.Context, in *Input) ([]Finding, error) {
	g, err := gatekeeperSetup(in)
	if err != nil || g == nil {
		return nil, err
	}
	return g.failures(ctx), nil
}

// failures is checkGatekeeperMutationFails's work on the set-up input.
func (g *gatekeeperInput) failures(ctx context.Context) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for _, p := range g.probes {
		_, err := g.run.Mutate(ctx, p.obj, p.ns)
		if err == nil {
			continue
		}
		var f Finding
		if errors.Is(err, gatekeeper.ErrNotConverging) {
			var involved []int
			for i := range g.muts.Objects {
				if got, err := g.run.MutateAlone(ctx, i, p.obj, p.ns); err == nil && !reflect.DeepEqual(got.Object, p.obj.Object) {
					involved = append(involved, i)
				}
			}
			if len(involved) == 0 {
				involved = []int{0}
			}
			var names []string
			for _, i := range involved {
				names = append(names, fmt.Sprintf("%s (%s)", objectName(g.muts.Objects[i]), where(g.objs[i])))
			}
			f = finding(g.objs[involved[0]], fmt.Sprintf("Gatekeeper's mutators do not converge on %s: %s keep changing it", p.what, strings.Join(names, ", ")),
				whyGatekeeperMutationFails, fixGatekeeperMutationFails)
		} else {
			i := g.mutatorIndex(err.Error())
			if i < 0 {
				i = 0
			}
			f = finding(g.objs[i], fmt.Sprintf("Gatekeeper's mutation of %s fails: %s", p.what, uuidPattern.ReplaceAllString(errors.Unwrap(err).Error(), "…")),
				whyGatekeeperMutationFails, fixGatekeeperMutationFails)
		}
		if !seen[f.Source+f.Message] {
			seen[f.Source+f.Message] = true
			out = append(out, f)
		}
	}
	return out
}

// checkGatekeeperMutatorsConflict reports each mutator whose implied
// schema conflicts with another's.
func checkGatekeeperMutatorsConflict(_ context.Context, in *Input) ([]Finding, error) {
	g, err := gatekeeperSetup(in)
	if err != nil || g == nil {
		return nil, err
	}
	conflicts := g.muts.Conflicts()
	var out []Finding
	for i := range g.muts.Objects {
		others := conflicts[i]
		if len(others) == 0 {
			continue
		}
		sort.Ints(others)
		var names []string
		for _, j := range others {
			loc, _, _ := unstructured.NestedString(g.muts.Objects[j].Object, "spec", "location")
			names = append(names, fmt.Sprintf("%s (location %s, %s)", objectName(g.muts.Objects[j]), loc, where(g.objs[j])))
		}
		loc, _, _ := unstructured.NestedString(g.muts.Objects[i].Object, "spec", "location")
		out = append(out, finding(g.objs[i], fmt.Sprintf("the schema implied by location %s conflicts with %s: Gatekeeper applies neither",
			loc, strings.Join(names, ", ")), whyGatekeeperMutatorsConflict, fixGatekeeperMutatorsConflict))
	}
	return out, nil
}

// checkGatekeeperMutatorsCompete runs each mutator alone on each probe and
// reports two that set the same field to different values, on the one
// Gatekeeper applies first (whose value is overwritten).
func checkGatekeeperMutatorsCompete(ctx context.Context, in *Input) ([]Finding, error) {
	g, err := gatekeeperSetup(in)
	if err != nil || g == nil {
		return nil, err
	}
	conflicting := g.muts.Conflicts()
	var out []Finding
	seen := map[[2]int]bool{}
	for _, p := range g.probes {
		writes := make([]map[string]any, len(g.muts.Objects))
		for i := range g.muts.Objects {
			if len(conflicting[i]) > 0 {
				continue // never applied
			}
			got, err := g.run.MutateAlone(ctx, i, p.obj, p.ns)
			if err != nil {
				continue // gatekeeper-mutation-fails
			}
			writes[i] = map[string]any{}
			changedLeaves("", p.obj.Object, got.Object, writes[i])
		}
		for i := range writes {
			for j := range writes {
				if i == j || seen[[2]int{i, j}] || gatekeeperOrder(g.muts.Objects[i], g.muts.Objects[j]) >= 0 {
					continue
				}
				for _, path := range sortedKeys(writes[i]) {
					vj, ok := writes[j][path]
					if !ok || reflect.DeepEqual(writes[i][path], vj) {
						continue
					}
					seen[[2]int{i, j}] = true
					out = append(out, finding(g.objs[i], fmt.Sprintf("%s sets %s of %s to %s, and %s (%s), applied after it, sets it to %s: its value never stays",
						objectName(g.muts.Objects[i]), path, p.what, jsonText(writes[i][path]), objectName(g.muts.Objects[j]), where(g.objs[j]), jsonText(vj)),
						whyGatekeeperMutatorsCompete, fixGatekeeperMutatorsCompete))
					break
				}
			}
		}
	}
	return out, nil
}

// gatekeeperOrder compares mutators as Gatekeeper orders them: group,
// kind, namespace, name (pkg/mutation/ordered_ids.go).
func gatekeeperOrder(a, b *unstructured.Unstructured) int {
	ka := [4]string{a.GroupVersionKind().Group, a.GetKind(), a.GetNamespace(), a.GetName()}
	kb := [4]string{b.GroupVersionKind().Group, b.GetKind(), b.GetNamespace(), b.GetName()}
	for i := range ka {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
	}
	return 0
}

// changedLeaves records, as JSON pointers, the values of after that differ
// from before: leaves, and whole values where before has none or another
// type.
func changedLeaves(ptr string, before, after any, into map[string]any) {
	switch a := after.(type) {
	case map[string]any:
		b, ok := before.(map[string]any)
		if !ok {
			into[ptr] = after
			return
		}
		for k, v := range a {
			changedLeaves(ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), b[k], v, into)
		}
	case []any:
		b, ok := before.([]any)
		if !ok || len(b) != len(a) {
			into[ptr] = after
			return
		}
		for i, v := range a {
			changedLeaves(ptr+"/"+strconv.Itoa(i), b[i], v, into)
		}
	default:
		if !reflect.DeepEqual(before, after) {
			into[ptr] = after
		}
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
