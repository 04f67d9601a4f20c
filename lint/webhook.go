package lint

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/truce-dev/truce/manifest"
)

// Rule ids of the webhook rules.
const (
	RuleWebhookFailClosedWithoutExclusion = "webhook-fail-closed-without-exclusion"
	RuleWebhookMatchesLeases              = "webhook-matches-leases"
	RuleWebhookMatchesEverything          = "webhook-matches-everything"
	RuleWebhookRuleNeverCalled            = "webhook-rule-never-called"
	RuleWebhookTimeoutTooLong             = "webhook-timeout-too-long"
	RuleWebhookSerialTimeouts             = "webhook-serial-timeouts"
	RuleWebhookSideEffects                = "webhook-side-effects"
	RuleWebhookFailurePolicyUnset         = "webhook-failure-policy-unset"
	RuleWebhookObjectSelectorBypass       = "webhook-object-selector-bypass"
)

func webhookRules() []Rule {
	return []Rule{
		{ID: RuleWebhookFailClosedWithoutExclusion, Severity: SeverityError,
			Summary: "A fail-closed webhook whose namespaceSelector does not exclude kube-system or its own namespace",
			Check:   checkFailClosedWithoutExclusion},
		{ID: RuleWebhookFailClosedSingleReplica, Severity: SeverityWarning,
			Summary: "A fail-closed webhook (or Kyverno's, for its fail-closed policies) served by a single replica, or by replicas no PodDisruptionBudget keeps one of",
			Check:   checkFailClosedSingleReplica},
		{ID: RuleWebhookMatchesLeases, Severity: SeverityError,
			Summary: "A webhook that intercepts Lease writes of kubelets and leader election (warning when it fails open)",
			Check:   checkMatchesLeases},
		{ID: RuleWebhookMatchesEverything, Severity: SeverityWarning,
			Summary: "A webhook rule for every group and every resource (*/*)",
			Check:   checkMatchesEverything},
		{ID: RuleWebhookRuleNeverCalled, Severity: SeverityWarning,
			Summary: "A webhook rule naming resources kube-apiserver never sends to webhooks",
			Check:   checkRuleNeverCalled},
		{ID: RuleWebhookTimeoutTooLong, Severity: SeverityWarning,
			Summary: "A webhook with timeoutSeconds unset (10s) or above what the write path can afford",
			Check:   checkTimeoutTooLong},
		{ID: RuleWebhookSerialTimeouts, Severity: SeverityWarning,
			Summary: "Mutating webhooks on the same resource, called one after another, whose timeouts add up",
			Check:   checkSerialTimeouts},
		{ID: RuleWebhookSideEffects, Severity: SeverityError,
			Summary: "A webhook whose sideEffects is not None or NoneOnDryRun",
			Check:   checkSideEffects},
		{ID: RuleWebhookFailurePolicyUnset, Severity: SeverityWarning,
			Summary: "A webhook without an explicit failurePolicy",
			Check:   checkFailurePolicyUnset},
		{ID: RuleWebhookObjectSelectorBypass, Severity: SeverityWarning,
			Summary: "A validating webhook scoped by objectSelector, which whoever edits labels can step around",
			Check:   checkObjectSelectorBypass},
	}
}

// webhookConfig is one Mutating- or ValidatingWebhookConfiguration.
type webhookConfig struct {
	obj      manifest.Object
	mutating bool
	hooks    []webhook
}

// webhook is the part of a Mutating- or ValidatingWebhook the rules read,
// as written (no defaults applied, so "unset" stays visible).
type webhook struct {
	index             int
	name              string
	rules             []admissionregistrationv1.RuleWithOperations
	failurePolicy     *admissionregistrationv1.FailurePolicyType
	matchPolicy       *admissionregistrationv1.MatchPolicyType
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	sideEffects       *admissionregistrationv1.SideEffectClass
	timeoutSeconds    *int32
	service           *admissionregistrationv1.ServiceReference
	reinvocation      *admissionregistrationv1.ReinvocationPolicyType
	matchConditions   []admissionregistrationv1.MatchCondition
}

// label names the webhook in messages: webhooks[0] "name".
func (w webhook) label() string { return fmt.Sprintf("webhooks[%d] %q", w.index, w.name) }

// failsClosed reports failurePolicy Fail, the v1 default.
func (w webhook) failsClosed() bool {
	return w.failurePolicy == nil || *w.failurePolicy == admissionregistrationv1.Fail
}

// timeout is what kube-apiserver waits for the webhook: timeoutSeconds, 10s
// when unset.
func (w webhook) timeout() time.Duration {
	if w.timeoutSeconds == nil {
		return 10 * time.Second
	}
	return time.Duration(*w.timeoutSeconds) * time.Second
}

// webhookConfigs decodes the admissionregistration.k8s.io/v1 webhook
// configurations of the input (the only version served since 1.22).
func webhookConfigs(in *Input) ([]webhookConfig, error) {
	var out []webhookConfig
	for _, o := range in.Objects {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group != admissionregistrationv1.GroupName || gvk.Version != "v1" {
			continue
		}
		switch gvk.Kind {
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &c); err != nil {
				return nil, fmt.Errorf("%s: decoding %s: %w", where(o), gvk.Kind, err)
			}
			cfg := webhookConfig{obj: o}
			for i, h := range c.Webhooks {
				cfg.hooks = append(cfg.hooks, webhook{
					index: i, name: h.Name, rules: h.Rules, failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy,
					namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector, sideEffects: h.SideEffects,
					timeoutSeconds: h.TimeoutSeconds, service: h.ClientConfig.Service, matchConditions: h.MatchConditions,
				})
			}
			out = append(out, cfg)
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &c); err != nil {
				return nil, fmt.Errorf("%s: decoding %s: %w", where(o), gvk.Kind, err)
			}
			cfg := webhookConfig{obj: o, mutating: true}
			for i, h := range c.Webhooks {
				cfg.hooks = append(cfg.hooks, webhook{
					index: i, name: h.Name, rules: h.Rules, failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy,
					namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector, sideEffects: h.SideEffects,
					timeoutSeconds: h.TimeoutSeconds, service: h.ClientConfig.Service, reinvocation: h.ReinvocationPolicy,
					matchConditions: h.MatchConditions,
				})
			}
			out = append(out, cfg)
		}
	}
	return out, nil
}

// forEachWebhook runs fn on every webhook of the input.
func forEachWebhook(in *Input, fn func(c webhookConfig, w webhook) ([]Finding, error)) ([]Finding, error) {
	cfgs, err := webhookConfigs(in)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, c := range cfgs {
		for _, w := range c.hooks {
			fs, err := fn(c, w)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where(c.obj), w.label(), err)
			}
			out = append(out, fs...)
		}
	}
	return out, nil
}

const (
	whyFailClosedWithoutExclusion = "With failurePolicy Fail every write the webhook matches is rejected while the webhook is down or unreachable " +
		"(\"failed calling webhook\"). In its own namespace that includes the writes that would bring it back, so it cannot restart; " +
		"in kube-system it blocks the control plane's own components, and the way out is deleting the webhook configuration by hand."
	fixFailClosedWithoutExclusion = "Exclude those namespaces in the namespaceSelector by the label the API server sets on every namespace: " +
		"namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [%s]}]}; " +
		"or use failurePolicy: Ignore if the webhook is not a security boundary."
)

// checkFailClosedWithoutExclusion: a fail-closed webhook whose
// namespaceSelector matches kube-system or the namespace of its own
// service.
func checkFailClosedWithoutExclusion(_ context.Context, in *Input) ([]Finding, error) {
	clusterScoped, err := clusterScopedBuiltins()
	if err != nil {
		return nil, err
	}
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		if !w.failsClosed() || onlyClusterScoped(w.rules, clusterScoped) {
			return nil, nil
		}
		namespaces := []string{"kube-system"}
		if w.service != nil && w.service.Namespace != "" && w.service.Namespace != "kube-system" {
			namespaces = append(namespaces, w.service.Namespace)
		}
		var matched []string
		for _, ns := range namespaces {
			ok, err := selectorMatches(w.namespaceSelector, namespaceLabels(in, ns))
			if err != nil {
				return nil, fmt.Errorf("namespaceSelector: %w", err)
			}
			if ok {
				matched = append(matched, ns)
			}
		}
		if len(matched) == 0 {
			return nil, nil
		}
		var desc []string
		for _, ns := range matched {
			if w.service != nil && ns == w.service.Namespace {
				desc = append(desc, fmt.Sprintf("%s (where its service %s runs)", ns, w.service.Name))
			} else {
				desc = append(desc, ns)
			}
		}
		policy := "failurePolicy Fail"
		if w.failurePolicy == nil {
			policy = "failurePolicy unset, i.e. Fail"
		}
		msg := fmt.Sprintf("%s fails closed (%s) and its namespaceSelector matches namespace %s", w.label(), policy, strings.Join(desc, " and "))
		return []Finding{finding(c.obj, msg, whyFailClosedWithoutExclusion,
			fmt.Sprintf(fixFailClosedWithoutExclusion, strings.Join(namespaces, ", ")))}, nil
	})
}

// leaseProbes are the Lease writes the control plane depends on: node
// heartbeats by the kubelet in kube-node-lease, leader election by
// kube-controller-manager in kube-system.
func leaseProbes() []probe {
	gvr := k8sschema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	kind := k8sschema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
	writers := []struct {
		namespace, name string
		user            *user.DefaultInfo
	}{
		{"kube-node-lease", "node-1", &user.DefaultInfo{Name: "system:node:node-1", Groups: []string{"system:nodes", user.AllAuthenticated}}},
		{"kube-system", "kube-controller-manager", &user.DefaultInfo{Name: user.KubeControllerManager, Groups: []string{user.AllAuthenticated}}},
	}
	var out []probe
	for _, w := range writers {
		lease := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
			"metadata": map[string]any{"name": w.name, "namespace": w.namespace},
			"spec":     map[string]any{"holderIdentity": w.name, "leaseDurationSeconds": int64(40)},
		}}
		for _, op := range []admission.Operation{admission.Update, admission.Create} {
			p := probe{gvr: gvr, kind: kind, namespace: w.namespace, name: w.name, op: op, object: lease, user: w.user}
			if op == admission.Update {
				p.oldObject = lease
			}
			out = append(out, p)
		}
	}
	return out
}

const (
	whyMatchesLeases = "Kubelets renew their node Lease in kube-node-lease every few seconds and kube-controller-manager and kube-scheduler " +
		"renew their leader-election Leases in kube-system: a webhook on that path adds a network call to every renewal, and when it " +
		"fails closed and is down, nodes go NotReady and controllers lose leadership."
	fixMatchesLeases = "Do not intercept coordination.k8s.io leases: list the groups and resources the webhook needs instead of \"*\", " +
		"or exclude kube-node-lease and kube-system in the namespaceSelector."
)

// checkMatchesLeases: a webhook whose rules, selectors and matchConditions
// let node or leader-election Lease writes through to it.
func checkMatchesLeases(ctx context.Context, in *Input) ([]Finding, error) {
	conditions := newConditionEvaluator()
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		// Leases of kubelets and leader election carry no labels.
		objOK, err := selectorMatches(w.objectSelector, labels.Set{})
		if err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
		if !objOK {
			return nil, nil
		}
		// The operations intercepted, by namespace, in probe order.
		var namespaces []string
		ops := map[string][]string{}
		for _, p := range leaseProbes() {
			nsOK, err := selectorMatches(w.namespaceSelector, namespaceLabels(in, p.namespace))
			if err != nil {
				return nil, fmt.Errorf("namespaceSelector: %w", err)
			}
			if !nsOK || !slices.ContainsFunc(w.rules, func(r admissionregistrationv1.RuleWithOperations) bool { return ruleMatches(r, w.matchPolicy, p) }) {
				continue
			}
			if !conditions.reaches(ctx, c, w, p) {
				continue
			}
			if _, ok := ops[p.namespace]; !ok {
				namespaces = append(namespaces, p.namespace)
			}
			ops[p.namespace] = append(ops[p.namespace], string(p.op))
		}
		if len(namespaces) == 0 {
			return nil, nil
		}
		var hits []string
		for _, ns := range namespaces {
			hits = append(hits, fmt.Sprintf("%s in %s", strings.Join(ops[ns], " and "), ns))
		}
		msg := fmt.Sprintf("%s intercepts coordination.k8s.io Lease writes: %s", w.label(), strings.Join(hits, ", "))
		f := finding(c.obj, msg, whyMatchesLeases, fixMatchesLeases)
		if !w.failsClosed() {
			f.Severity = SeverityWarning
			f.Message += " (it fails open: latency, not an outage)"
		}
		return []Finding{f}, nil
	})
}

const (
	whyMatchesEverything = "A rule for every group and resource sends every write in the cluster through the webhook, including resources " +
		"installed later, leases, events and tokens: every write pays its latency, and when it is down and fails closed the cluster's " +
		"write path stops."
	fixMatchesEverything = "List the API groups and resources the webhook actually handles."
)

func checkMatchesEverything(_ context.Context, in *Input) ([]Finding, error) {
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		for i, r := range w.rules {
			if namesAll(r) {
				msg := fmt.Sprintf("%s rules[%d] matches every group and resource (apiGroups %q, resources %q)", w.label(), i, r.APIGroups, r.Resources)
				return []Finding{finding(c.obj, msg, whyMatchesEverything, fixMatchesEverything)}, nil
			}
		}
		return nil, nil
	})
}

const (
	whyNeverCalled = "kube-apiserver never sends writes of webhook configurations and admission policies and bindings to webhooks " +
		"(so that a broken webhook cannot lock its own configuration), and in 1.37 it also leaves out the non-persisted review resources " +
		"(TokenReview, SubjectAccessReview and the like). A rule naming them does nothing, while it looks like protection."
	fixNeverCalled = "Remove those resources from the rule. Protect admission configuration with RBAC on admissionregistration.k8s.io " +
		"(who may write webhook configurations and policies) rather than with a webhook."
)

func checkRuleNeverCalled(_ context.Context, in *Input) ([]Finding, error) {
	config, err := admissionConfigResources()
	if err != nil {
		return nil, err
	}
	virtual := virtualResources()
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		var notes []string
		for _, s := range neverSentWarnings(w.index, w.rules, virtual) {
			notes = append(notes, s+" (a virtual review resource)")
		}
		for _, s := range neverSentWarnings(w.index, w.rules, config) {
			notes = append(notes, s+" (admission configuration is never sent to webhooks)")
		}
		if len(notes) == 0 {
			return nil, nil
		}
		slices.Sort(notes)
		msg := fmt.Sprintf("webhook %q: %s", w.name, strings.Join(notes, "; "))
		return []Finding{finding(c.obj, msg, whyNeverCalled, fixNeverCalled)}, nil
	})
}

const (
	whyTimeout = "kube-apiserver waits up to timeoutSeconds (10 when unset) for the webhook on every write it matches; a slow or unreachable " +
		"webhook then holds each request that long and API server latency climbs. Admission logic should answer in milliseconds."
	fixTimeout = "Set an explicit short timeoutSeconds, such as 2, at most %s."
)

func checkTimeoutTooLong(_ context.Context, in *Input) ([]Finding, error) {
	limit := in.options.maxWebhookTimeout()
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		var msg string
		switch {
		case w.timeoutSeconds == nil:
			msg = fmt.Sprintf("%s has no timeoutSeconds: kube-apiserver waits up to the default 10s", w.label())
		case w.timeout() > limit:
			msg = fmt.Sprintf("%s has timeoutSeconds %d, above %s", w.label(), *w.timeoutSeconds, limit)
		default:
			return nil, nil
		}
		return []Finding{finding(c.obj, msg, whyTimeout, fmt.Sprintf(fixTimeout, limit))}, nil
	})
}

const (
	whySerialTimeouts = "kube-apiserver calls mutating webhooks one after another, so the timeouts of all that match a write add up " +
		"(and webhooks with reinvocationPolicy IfNeeded can be called a second time): when they are slow together a write waits the sum."
	fixSerialTimeouts = "Lower the timeoutSeconds of these webhooks so that their sum stays within %s, merge them, or move the mutations " +
		"in-process as MutatingAdmissionPolicies."
)

// checkSerialTimeouts: mutating webhooks that match the same request and
// whose timeouts sum above the limit. Each maximal set is reported once,
// at the first configuration of the set.
func checkSerialTimeouts(_ context.Context, in *Input) ([]Finding, error) {
	limit := in.options.maxWebhookTimeout()
	cfgs, err := webhookConfigs(in)
	if err != nil {
		return nil, err
	}
	type member struct {
		cfg  int
		hook webhook
	}
	var all []member
	for i, c := range cfgs {
		if !c.mutating {
			continue
		}
		for _, w := range c.hooks {
			all = append(all, member{i, w})
		}
	}
	type group struct {
		members []member
		probe   probe
		total   time.Duration
	}
	var groups []group
	seen := map[string]bool{}
	for _, m := range all {
		for _, r := range m.hook.rules {
			for _, p := range probesOf(r) {
				var g group
				for _, other := range all {
					for _, or := range other.hook.rules {
						if ruleMatches(or, other.hook.matchPolicy, p) {
							g.members = append(g.members, other)
							g.total += other.hook.timeout()
							break
						}
					}
				}
				if len(g.members) < 2 || g.total <= limit {
					continue
				}
				var keys []string
				for _, gm := range g.members {
					keys = append(keys, fmt.Sprintf("%d/%d", gm.cfg, gm.hook.index))
				}
				key := strings.Join(keys, ",")
				if seen[key] {
					continue
				}
				seen[key] = true
				g.probe = p
				groups = append(groups, g)
			}
		}
	}
	// Keep the maximal sets: a pair that is part of a larger chain says
	// nothing more.
	contains := func(big, small group) bool {
		for _, s := range small.members {
			if !slices.ContainsFunc(big.members, func(b member) bool { return b.cfg == s.cfg && b.hook.index == s.hook.index }) {
				return false
			}
		}
		return true
	}
	var out []Finding
	for i, g := range groups {
		maximal := true
		for j, h := range groups {
			if i != j && len(h.members) > len(g.members) && contains(h, g) {
				maximal = false
				break
			}
		}
		if !maximal {
			continue
		}
		var names []string
		for _, m := range g.members {
			names = append(names, fmt.Sprintf("%q (%s %s, %s)", m.hook.name, cfgs[m.cfg].obj.Object.GetKind(), cfgs[m.cfg].obj.Object.GetName(), m.hook.timeout()))
		}
		what := g.probe.gvr.Resource
		if g.probe.gvr.Group != "" && g.probe.gvr.Group != "*" {
			what += "." + g.probe.gvr.Group
		}
		if what == "*" || g.probe.gvr.Group == "*" {
			what = "every resource"
		}
		msg := fmt.Sprintf("%d mutating webhooks match %s %s and are called one after another: %s; together up to %s, above %s",
			len(g.members), g.probe.op, what, strings.Join(names, ", "), g.total, limit)
		out = append(out, finding(cfgs[g.members[0].cfg].obj, msg, whySerialTimeouts, fmt.Sprintf(fixSerialTimeouts, limit)))
	}
	return out, nil
}

const (
	whySideEffects = "admissionregistration.k8s.io/v1 accepts only None and NoneOnDryRun: kube-apiserver rejects the configuration, and a " +
		"webhook with side effects cannot be called on dry runs (kubectl diff, server-side dry run, Argo CD's server-side diff) without " +
		"acting on writes that are never stored."
	fixSideEffects = "Set sideEffects: None; if the webhook does work outside the request, skip it when request.dryRun is true, set " +
		"sideEffects: NoneOnDryRun, and reconcile that work, since a later admission step can still reject the write."
)

func checkSideEffects(_ context.Context, in *Input) ([]Finding, error) {
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		var msg string
		switch {
		case w.sideEffects == nil:
			msg = fmt.Sprintf("%s has no sideEffects; it is required", w.label())
		case *w.sideEffects == admissionregistrationv1.SideEffectClassNone, *w.sideEffects == admissionregistrationv1.SideEffectClassNoneOnDryRun:
			return nil, nil
		default:
			msg = fmt.Sprintf("%s has sideEffects %s; want None or NoneOnDryRun", w.label(), *w.sideEffects)
		}
		return []Finding{finding(c.obj, msg, whySideEffects, fixSideEffects)}, nil
	})
}

const (
	whyFailurePolicyUnset = "failurePolicy decides whether an unreachable webhook blocks writes (Fail, the default) or lets them through " +
		"(Ignore): an availability and a security decision that a default hides from review."
	fixFailurePolicyUnset = "Write failurePolicy explicitly: Ignore for mutating webhooks that are not a security boundary (validate the " +
		"final state separately), Fail for validating webhooks that are, with kube-system and the webhook's namespace excluded."
)

func checkFailurePolicyUnset(_ context.Context, in *Input) ([]Finding, error) {
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		if w.failurePolicy != nil {
			return nil, nil
		}
		msg := fmt.Sprintf("%s has no failurePolicy; it defaults to Fail", w.label())
		return []Finding{finding(c.obj, msg, whyFailurePolicyUnset, fixFailurePolicyUnset)}, nil
	})
}

const (
	whyObjectSelector = "objectSelector is matched against the labels of the object being written (new or old), which its author controls: " +
		"whoever may edit the object's labels can make the validating webhook skip it. Fine for opt-in behaviour, not as an enforcement boundary."
	fixObjectSelector = "Scope enforcement by namespace (namespaceSelector; namespace labels need rights on the Namespace) or by " +
		"matchConditions on the request (e.g. request.userInfo), and drop the objectSelector."
)

func checkObjectSelectorBypass(_ context.Context, in *Input) ([]Finding, error) {
	return forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		if c.mutating || selectorIsEmpty(w.objectSelector) {
			return nil, nil
		}
		sel, err := metav1.LabelSelectorAsSelector(w.objectSelector)
		if err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
		msg := fmt.Sprintf("%s validates only objects whose labels match %q", w.label(), sel.String())
		return []Finding{finding(c.obj, msg, whyObjectSelector, fixObjectSelector)}, nil
	})
}
