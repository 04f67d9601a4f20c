package kyverno

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	"github.com/truce-dev/truce/simulate"
)

// BackgroundManager is the field manager of Kyverno's background
// controller, which makes the generate rules' writes.
const BackgroundManager = "kyverno-background-controller"

// generateDelay is how long Kyverno's background controller takes to act
// on an UpdateRequest: it reacts to watch events at once.
const generateDelay = time.Second

// generatingPolicyKinds are the CEL kinds Kyverno's background controller
// runs: they generate, they never answer admission.
var generatingPolicyKinds = map[k8sschema.GroupKind]bool{
	{Group: GroupCEL, Kind: "GeneratingPolicy"}:           true,
	{Group: GroupCEL, Kind: "NamespacedGeneratingPolicy"}: true,
}

// Uses reports whether objects of gk make truce run Kyverno: the policies
// it evaluates in admission (IsPolicy) and those its background
// controller runs.
func Uses(gk k8sschema.GroupKind) bool {
	return IsPolicy(gk) || generatingPolicyKinds[gk] || deletingPolicyKinds[gk]
}

var _ simulate.BackgroundEngine = (*Engine)(nil)

// Background implements simulate.BackgroundEngine: the generate rules of
// the ClusterPolicies and Policies among objs, as Kyverno's background
// controller runs them.
func (e *Engine) Background(ctx context.Context, objs []*unstructured.Unstructured) (simulate.Background, error) {
	var policies, mutating, deleting, exceptions []json.RawMessage
	var mutatingObjs []*unstructured.Unstructured
	kinds := map[k8sschema.GroupVersionKind]bool{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if !IsKyvernoKind(gvk.GroupKind()) && gvk.Kind != "CustomResourceDefinition" {
			kinds[gvk] = true
		}
		if mutatingPolicyKinds[gvk.GroupKind()] && mutatesExisting(o) {
			mutatingObjs = append(mutatingObjs, o)
			continue
		}
		if deletingPolicyKinds[gvk.GroupKind()] || (gvk.Group == GroupCEL && gvk.Kind == "PolicyException") {
			raw, err := json.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			if gvk.Kind == "PolicyException" {
				exceptions = append(exceptions, raw)
			} else {
				deleting = append(deleting, raw)
			}
			continue
		}
		legacyKind := gvk.Group == GroupLegacy && (gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy")
		if legacyKind && hasRule(o, "mutate", "targets") {
			raw, err := json.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			mutating = append(mutating, raw)
		}
		legacy := legacyKind && hasRule(o, "generate")
		if !legacy && !generatingPolicyKinds[gvk.GroupKind()] {
			continue
		}
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		policies = append(policies, raw)
	}
	if len(policies) == 0 && len(mutatingObjs) == 0 && len(mutating) == 0 && len(deleting) == 0 {
		return &background{}, nil
	}
	if err := e.init(); err != nil {
		return nil, err
	}
	reg, err := registry(append(objs, e.crds...))
	if err != nil {
		return nil, err
	}
	if len(mutatingObjs) > 0 {
		// A MutatingPolicy Kyverno turned into a MutatingAdmissionPolicy
		// never reaches its webhook, so no admission creates the
		// UpdateRequest that mutates existing objects.
		gen, err := e.admissionPolicies(ctx, objs, &protocol.LoadRequest{Resources: discovery(reg)})
		if err != nil {
			return nil, err
		}
		for _, o := range mutatingObjs {
			if o.GetNamespace() == "" && gen.generated[o.GetKind()+"/"+o.GetName()] {
				continue
			}
			raw, err := json.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			mutating = append(mutating, raw)
		}
	}
	if len(policies) == 0 && len(mutating) == 0 && len(deleting) == 0 {
		return &background{}, nil
	}
	b := &background{h: e.h, policies: policies, mutating: mutating, resources: discovery(reg), notes: &e.notes}
	if len(deleting) > 0 {
		// The exceptions go with the DeletingPolicies they may name.
		b.deletingPolicies = append(deleting, exceptions...)
	}
	for k := range kinds {
		b.kinds = append(b.kinds, k)
	}
	sort.Slice(b.kinds, func(i, j int) bool { return b.kinds[i].String() < b.kinds[j].String() })
	if len(b.policies) > 0 {
		resp, err := b.call(ctx, protocol.OpGenerate, &protocol.BackgroundRequest{})
		if err != nil {
			return nil, fmt.Errorf("reading the Kyverno policies' generate rules: %w", err)
		}
		b.rules = resp.Rules
	}
	if len(b.mutating) > 0 {
		if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return mutatingPolicyKinds[o.GroupVersionKind().GroupKind()] }) {
			if b.openAPI, err = e.docs.gzipped(reg.OpenAPIClient()); err != nil {
				return nil, fmt.Errorf("the cluster's OpenAPI documents for Kyverno's MutatingPolicies: %w", err)
			}
		}
		resp, err := b.call(ctx, protocol.OpMutateExisting, &protocol.BackgroundRequest{})
		if err != nil {
			return nil, fmt.Errorf("reading the Kyverno policies that mutate existing objects: %w", err)
		}
		b.mutate = resp.Rules
	}
	if len(b.deletingPolicies) > 0 {
		resp, err := b.call(ctx, protocol.OpDeleting, &protocol.BackgroundRequest{})
		if err != nil {
			return nil, fmt.Errorf("reading the Kyverno DeletingPolicies and cleanup policies: %w", err)
		}
		b.failed("Kyverno's DeletingPolicies and cleanup policies", resp.Errors)
		b.deleting = resp.Rules
	}
	return b, nil
}

// hasRule reports whether a policy has a rule with the field at path
// (a generate rule, a mutate rule with targets), so that a cluster whose
// policies only mutate and validate at admission never asks the helper.
func hasRule(o *unstructured.Unstructured, path ...string) bool {
	rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
	for _, r := range rules {
		if m, ok := r.(map[string]any); ok {
			if v, found, _ := unstructured.NestedFieldNoCopy(m, path...); found && v != nil {
				return true
			}
		}
	}
	return false
}

// background is a set of generate rules and what the helper needs to run
// them.
type background struct {
	h *helper
	// notes keep what Kyverno's controllers failed at (the engine's).
	notes     *notes
	policies  []json.RawMessage
	resources []*metav1.APIResourceList
	rules     []protocol.BackgroundRule
	// mutating are the MutatingPolicies that mutate existing objects,
	// mutate their descriptions, openAPI the cluster's documents they need.
	mutating []json.RawMessage
	mutate   []protocol.BackgroundRule
	openAPI  map[string][]byte
	// deletingPolicies are the DeletingPolicies and the CEL
	// PolicyExceptions, deleting their descriptions.
	deletingPolicies []json.RawMessage
	deleting         []protocol.BackgroundRule
	// kinds are those of the objects the cluster and repository hold: a
	// GeneratingPolicy's CEL may read any of them.
	kinds []k8sschema.GroupVersionKind
}

// call asks the helper's background operation op ("generate" or
// "mutateExisting") about req.
func (b *background) call(ctx context.Context, op string, req *protocol.BackgroundRequest) (*protocol.BackgroundResponse, error) {
	req.Resources = b.resources
	switch op {
	case protocol.OpGenerate:
		req.Policies = b.policies
	case protocol.OpMutateExisting:
		req.Policies, req.OpenAPI = b.mutating, b.openAPI
	case protocol.OpDeleting:
		req.Policies = b.deletingPolicies
	}
	r, err := b.h.call(ctx, &protocol.Request{Op: op, Generate: req})
	if err != nil {
		return nil, err
	}
	if r.Generate == nil {
		return &protocol.BackgroundResponse{}, nil
	}
	return r.Generate, nil
}

// Writers implements simulate.Background: a writer per predictable rule.
func (b *background) Writers() []simulate.Writer {
	var out []simulate.Writer
	for _, r := range b.rules {
		if r.Unpredictable == "" {
			out = append(out, &generateWriter{b: b, rule: r, seen: map[types.UID]trigger{}, generated: map[cluster.Ref]bool{}})
		}
	}
	for _, r := range b.mutate {
		if r.Unpredictable == "" {
			out = append(out, &mutateWriter{b: b, rule: r, seen: map[types.UID]string{}})
		}
	}
	deleting, _ := b.deletingWriters()
	return append(out, deleting...)
}

// Unpredictable implements simulate.Background.
func (b *background) Unpredictable() []string {
	var out []string
	for _, r := range b.rules {
		if r.Unpredictable != "" {
			out = append(out, fmt.Sprintf("%s: %s", ruleName(r), r.Unpredictable))
		}
	}
	for _, r := range b.mutate {
		if r.Unpredictable != "" {
			out = append(out, fmt.Sprintf("%s: %s", mutateName(r), r.Unpredictable))
		}
	}
	for _, r := range b.deleting {
		if r.Unpredictable != "" {
			out = append(out, fmt.Sprintf("Kyverno %s: %s", deletingName(r), r.Unpredictable))
		}
	}
	_, bad := b.deletingWriters()
	return append(out, bad...)
}

// ruleName names a generate rule or GeneratingPolicy in reports.
func ruleName(r protocol.BackgroundRule) string {
	if r.CEL {
		return "Kyverno GeneratingPolicy " + r.Policy
	}
	return fmt.Sprintf("Kyverno generate rule %s of policy %s", r.Rule, r.Policy)
}

// trigger is what the writer last did for a trigger object.
type trigger struct {
	resourceVersion string
	operation       string
}

// generateWriter is one generate rule as Kyverno's background controller
// runs it. truce decides when the controller acts: when a trigger is
// admitted (created, or changed by a write, which Kyverno's webhook turns
// into an UpdateRequest), and, with synchronize, whenever the clone source
// or a generated object changes (Kyverno watches both and reprocesses the
// trigger). What it writes is Kyverno's answer.
type generateWriter struct {
	b    *background
	rule protocol.BackgroundRule
	// seen are the triggers processed, by UID.
	seen      map[types.UID]trigger
	generated map[cluster.Ref]bool
}

var _ simulate.Writer = (*generateWriter)(nil)

// Name implements simulate.Writer.
func (w *generateWriter) Name() string { return BackgroundManager }

// Describe implements simulate.Writer.
func (w *generateWriter) Describe() string {
	sync := "without synchronize"
	if w.rule.Synchronize {
		sync = "with synchronize"
	}
	what := fmt.Sprintf("generates %s %s", w.rule.Kind, w.rule.Name)
	switch {
	case w.rule.CEL:
		what = "generates what its CEL generator applies"
	case w.rule.Clone != "":
		what = fmt.Sprintf("clones %s %s", w.rule.Kind, w.rule.Clone)
	case len(w.rule.CloneList) > 0:
		what = fmt.Sprintf("clones %s from %s", strings.Join(w.rule.CloneList, ", "), w.rule.CloneNamespace)
	}
	kinds := make([]string, len(w.rule.Kinds))
	for i, k := range w.rule.Kinds {
		kinds[i] = strings.TrimPrefix(k, "/")
	}
	return fmt.Sprintf("%s %s for each %s (%s)", ruleName(w.rule), what, strings.Join(kinds, ", "), sync)
}

// Delay implements simulate.Writer.
func (w *generateWriter) Delay() time.Duration { return generateDelay }

// Creates implements the simulation's creator: the generated kind (for a
// GeneratingPolicy, what it generated so far).
func (w *generateWriter) Creates() []k8sschema.GroupVersionKind {
	if w.rule.CEL {
		seen := map[k8sschema.GroupVersionKind]bool{}
		var out []k8sschema.GroupVersionKind
		for r := range w.generated {
			if !seen[r.GroupVersionKind] {
				seen[r.GroupVersionKind] = true
				out = append(out, r.GroupVersionKind)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
		return out
	}
	if w.rule.Kind == "" {
		return nil
	}
	gv, _ := k8sschema.ParseGroupVersion(w.rule.APIVersion)
	return []k8sschema.GroupVersionKind{gv.WithKind(w.rule.Kind)}
}

// Watches implements simulate.Writer: the triggers' kinds, the clone
// source and what the rule generated.
func (w *generateWriter) Watches(ref cluster.Ref) bool {
	for _, k := range w.rule.Kinds {
		if s := parseKind(k); s.kind == ref.Kind && (s.group == "" || s.group == ref.Group) && s.sub == "" {
			return true
		}
	}
	if w.generated[ref] {
		return true
	}
	if w.rule.Clone != "" && ref.Kind == w.rule.Kind && ref.Namespace+"/"+ref.Name == w.rule.Clone {
		return true
	}
	for _, k := range w.rule.CloneList {
		if parseKind(k).kind == ref.Kind && ref.Namespace == w.rule.CloneNamespace {
			return true
		}
	}
	return false
}

// kindSpec is a kind as Kyverno's policies write it.
type kindSpec struct{ group, version, kind, sub string }

// parseKind reads "Kind", "version/Kind", "group/version/Kind" and
// "Kind/subresource".
func parseKind(s string) kindSpec {
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 1:
		return kindSpec{kind: parts[0]}
	case 2:
		if r := []rune(parts[0]); len(r) > 0 && unicode.IsUpper(r[0]) {
			return kindSpec{kind: parts[0], sub: parts[1]}
		}
		return kindSpec{version: parts[0], kind: parts[1]}
	default:
		return kindSpec{group: parts[0], version: parts[1], kind: parts[2]}
	}
}

// gvks resolves a kind of a policy through the cluster's REST mapper; a
// kind without a group is looked for in every group, as Kyverno matches
// it.
func gvks(mapper meta.RESTMapper, s kindSpec) []k8sschema.GroupVersionKind {
	if s.kind == "" || s.kind == "*" || s.sub != "" {
		return nil
	}
	if s.group != "" || s.version != "" {
		m, err := mapper.RESTMapping(k8sschema.GroupKind{Group: s.group, Kind: s.kind}, s.version)
		if err != nil {
			return nil
		}
		return []k8sschema.GroupVersionKind{m.GroupVersionKind}
	}
	plural, _ := meta.UnsafeGuessKindToResource(k8sschema.GroupVersionKind{Kind: s.kind})
	kinds, err := mapper.KindsFor(k8sschema.GroupVersionResource{Resource: plural.Resource})
	if err != nil {
		return nil
	}
	seen := map[k8sschema.GroupKind]bool{}
	var out []k8sschema.GroupVersionKind
	for _, k := range kinds {
		if k.Kind == s.kind && !seen[k.GroupKind()] {
			seen[k.GroupKind()] = true
			out = append(out, k)
		}
	}
	return out
}

// listTriggers lists the objects of kinds (a rule's "group/Kind" entries)
// in the cluster, in a stable order; what names the rule in errors.
func listTriggers(ctx context.Context, c cluster.Cluster, kinds []string, what string) ([]*unstructured.Unstructured, error) {
	var triggers []*unstructured.Unstructured
	for _, k := range kinds {
		for _, gvk := range gvks(c.RESTMapper(), parseKind(k)) {
			objs, err := c.List(ctx, gvk, "")
			if err != nil {
				return nil, fmt.Errorf("listing %s, the triggers of %s: %w", gvk.Kind, what, err)
			}
			triggers = append(triggers, objs...)
		}
	}
	sort.Slice(triggers, func(i, j int) bool { return cluster.RefOf(triggers[i]).String() < cluster.RefOf(triggers[j]).String() })
	return triggers, nil
}

// Act implements simulate.Writer.
func (w *generateWriter) Act(ctx context.Context, c cluster.Cluster) error {
	triggers, err := listTriggers(ctx, c, w.rule.Kinds, w.Describe())
	if err != nil {
		return err
	}
	var objects []json.RawMessage
	loaded := false
	for _, t := range triggers {
		prev, processed := w.seen[t.GetUID()]
		op := "CREATE"
		switch {
		case processed && prev.resourceVersion != t.GetResourceVersion():
			// The trigger was written: Kyverno's webhook sees an UPDATE.
			op = "UPDATE"
		case processed && w.rule.Synchronize:
			// A change of the source or of a generated object: the
			// controller reprocesses the trigger's UpdateRequest.
			op = prev.operation
		case processed:
			continue
		}
		if !loaded {
			var err error
			if objects, err = w.objects(ctx, c); err != nil {
				return err
			}
			loaded = true
		}
		raw, err := json.Marshal(t.Object)
		if err != nil {
			return err
		}
		req := &protocol.BackgroundRequest{Trigger: raw, Operation: op, Objects: objects, Policy: w.rule.Policy, Rule: w.rule.Rule}
		if ns := t.GetNamespace(); ns != "" {
			if live, err := c.Get(ctx, cluster.Ref{GroupVersionKind: k8sschema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: ns}); err == nil {
				req.NamespaceLabels = live.GetLabels()
			}
		}
		resp, err := w.b.call(ctx, protocol.OpGenerate, req)
		if err != nil {
			return fmt.Errorf("%s for %s: %w", w.Describe(), cluster.RefOf(t), err)
		}
		w.seen[t.GetUID()] = trigger{resourceVersion: t.GetResourceVersion(), operation: op}
		w.b.failed(w.Describe(), resp.Errors)
		for _, wr := range resp.Writes {
			obj, err := applyWrite(ctx, c, wr, w.Describe())
			if err != nil {
				return err
			}
			if wr.Op == "create" || obj.GetLabels()["generate.kyverno.io/policy-name"] != "" {
				w.generated[cluster.RefOf(obj)] = true
			}
		}
		if len(resp.Writes) > 0 {
			// What Kyverno wrote is what it reads next time.
			loaded = false
		}
	}
	return nil
}

// objects are the live objects the generate controller reads: the clone
// source (or the cloneList's namespace) and every object of the generated
// kind (its target's namespace and name may come from variables).
func (w *generateWriter) objects(ctx context.Context, c cluster.Cluster) ([]json.RawMessage, error) {
	var objs []*unstructured.Unstructured
	list := func(s kindSpec, ns string) error {
		for _, gvk := range gvks(c.RESTMapper(), s) {
			l, err := c.List(ctx, gvk, ns)
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("listing %s for %s: %w", gvk.Kind, w.Describe(), err)
			}
			objs = append(objs, l...)
		}
		return nil
	}
	if w.rule.Kind != "" {
		gv, _ := k8sschema.ParseGroupVersion(w.rule.APIVersion)
		if err := list(kindSpec{group: gv.Group, version: gv.Version, kind: w.rule.Kind}, ""); err != nil {
			return nil, err
		}
	}
	if w.rule.CEL {
		kinds := append([]k8sschema.GroupVersionKind(nil), w.b.kinds...)
		kinds = append(kinds, w.Creates()...)
		seen := map[k8sschema.GroupVersionKind]bool{}
		for _, k := range kinds {
			if seen[k] {
				continue
			}
			seen[k] = true
			if err := list(kindSpec{group: k.Group, version: k.Version, kind: k.Kind}, ""); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range w.rule.CloneList {
		if err := list(parseKind(k), w.rule.CloneNamespace); err != nil {
			return nil, err
		}
	}
	return rawObjects(objs)
}

// rawObjects encodes objs for the helper.
func rawObjects(objs []*unstructured.Unstructured) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// applyWrite makes one of Kyverno's writes, as its background controller
// does: a create, or an update of the live object. It returns the object
// written (for an update refused by the API server, as Kyverno sent it).
func applyWrite(ctx context.Context, c cluster.Cluster, wr protocol.Write, who string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(wr.Object); err != nil {
		return nil, fmt.Errorf("decoding a write of %s: %w", who, err)
	}
	ref := cluster.RefOf(obj)
	opts := cluster.WriteOptions{FieldManager: BackgroundManager}
	var written *unstructured.Unstructured
	var err error
	switch wr.Op {
	case "create":
		obj.SetResourceVersion("")
		obj.SetUID("")
		obj.SetManagedFields(nil)
		obj.SetCreationTimestamp(metav1.Time{})
		written, err = c.Create(ctx, obj, opts)
	case "update":
		live, gerr := c.Get(ctx, ref)
		if gerr != nil {
			err = gerr
			break
		}
		obj.SetResourceVersion(live.GetResourceVersion())
		obj.SetManagedFields(nil)
		written, err = c.Update(ctx, obj, opts)
	default:
		return nil, fmt.Errorf("%s: the helper answered a write %q", who, wr.Op)
	}
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) {
		return nil, fmt.Errorf("%s: %s %s: %w", who, wr.Op, ref, err)
	}
	// The API server refusing a write (a conflict, a webhook) is what
	// Kyverno would meet too: the UpdateRequest fails and is retried on
	// the next event.
	if written == nil {
		written = obj
	}
	return written, nil
}
