// Package configuration generates the MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration that register `truce webhook serve` with
// the API server, with safe defaults that avoid the usual webhook outages
// (Kubernetes' Admission Webhook Good Practices,
// https://kubernetes.io/docs/concepts/cluster-administration/admission-webhooks-good-practices/):
// fail open when mutating, fail closed when validating, a short timeout, no
// side effects, and never the namespaces the webhook itself needs to
// restart.
package configuration

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Options.
const (
	DefaultName           = "truce"
	DefaultPort           = 443
	DefaultTimeoutSeconds = 2
)

// The server's paths: one webhook per phase, which evaluates every policy
// of that phase, so the API server calls truce once per phase and write.
const (
	MutatePath   = "/mutate"
	ValidatePath = "/validate"
)

// ExcludeLeasesCondition is the name of the matchCondition that keeps
// coordination.k8s.io Leases away from the webhook.
const ExcludeLeasesCondition = "truce.dev/exclude-leases"

// excludeLeasesExpression: node heartbeats and leader election renew
// Leases every few seconds; they must never wait on (or fail because of) a
// webhook. Rules cannot subtract a resource from a wildcard, a
// matchCondition can, and it is evaluated in the API server before any call.
const excludeLeasesExpression = `!(request.resource.group == "coordination.k8s.io" && request.resource.resource == "leases")`

// systemNamespace is always excluded: the control plane's add-ons must be
// able to restart while the webhook is down.
const systemNamespace = "kube-system"

// namespaceNameLabel is set by the API server on every namespace to its
// name, which makes it a selector that cannot be forged by labelling.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// Service is the in-cluster Service the API server calls.
type Service struct {
	Namespace, Name string
	// Port defaults to DefaultPort.
	Port int32
}

// Options describe where the webhook runs. Exactly one of Service and URL
// is set.
type Options struct {
	// Name of both configurations; DefaultName when empty.
	Name string
	// Service is the webhook's Service; MutatePath and ValidatePath are
	// its paths.
	Service *Service
	// URL is the webhook's base URL (https) when it is not reached through
	// a Service; MutatePath and ValidatePath are appended.
	URL string
	// CABundle is the PEM CA certificate(s) that signed the serving
	// certificate. Required.
	CABundle []byte
	// Namespace is where the webhook's pods run, excluded from matching so
	// that they can be recreated while the webhook is down. Defaults to
	// Service.Namespace.
	Namespace string
	// TimeoutSeconds bounds each call; DefaultTimeoutSeconds when zero.
	TimeoutSeconds int32
}

// Configurations are the generated objects. Mutating is nil when there is
// no MutatingAdmissionPolicy, Validating when there is no
// ValidatingAdmissionPolicy.
type Configurations struct {
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
	// Warnings say what the configurations do differently from what the
	// policies ask for (e.g. resources a wildcard cannot reach).
	Warnings []string
}

// Objects returns the configurations as unstructured objects, mutating
// first, without the empty fields a typed object carries (creationTimestamp).
func (c *Configurations) Objects() ([]*unstructured.Unstructured, error) {
	var objs []runtime.Object
	if c.Mutating != nil {
		objs = append(objs, c.Mutating)
	}
	if c.Validating != nil {
		objs = append(objs, c.Validating)
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("converting %T: %w", o, err)
		}
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// PolicyError is a policy Generate cannot turn into webhook rules. Index is
// its position in the policies passed to Generate, so that callers can name
// the file it came from.
type PolicyError struct {
	Index  int
	Policy *unstructured.Unstructured
	Err    error
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s %q: %v", e.Policy.GetKind(), e.Policy.GetName(), e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// ErrNoPolicies is returned when policies hold no admission policy at all.
var ErrNoPolicies = errors.New("no MutatingAdmissionPolicy or ValidatingAdmissionPolicy found")

const (
	group          = "admissionregistration.k8s.io"
	mutatingKind   = "MutatingAdmissionPolicy"
	validatingKind = "ValidatingAdmissionPolicy"
)

// policyVersions are the versions of the policy APIs whose matchConstraints
// have the v1 shape.
var policyVersions = []string{"v1", "v1beta1", "v1alpha1"}

// Generate returns the webhook configurations that send the writes matched
// by policies to the webhook. Objects other than MutatingAdmissionPolicies
// and ValidatingAdmissionPolicies and their bindings (params) are skipped.
// When the objects include bindings of a kind, a policy of that kind no
// binding names is left out with a warning: it never applies, and sending
// its writes would only add a call that can fail.
//
// The rules are the union of the policies' matchConstraints.resourceRules.
// They can only be wider than the policies: webhook rules have no
// resourceNames and no exclusions (excludeResourceRules), and the policies'
// namespace and object selectors and their bindings are not expressible per
// policy in one webhook. So the server keeps matching every policy itself,
// exactly as the API server would in-process; the configuration only keeps
// writes no policy can match from being sent at all.
func Generate(policies []*unstructured.Unstructured, opts Options) (*Configurations, error) {
	o, err := opts.complete()
	if err != nil {
		return nil, err
	}
	// Every policy has at least one rule (policyRules), so a kind has
	// policies exactly when it has rules.
	var mutating, validating []rule
	var warnings []string
	bound := boundPolicies(policies)
	for i, p := range policies {
		gvk := p.GroupVersionKind()
		if gvk.Group != group || (gvk.Kind != mutatingKind && gvk.Kind != validatingKind) {
			continue
		}
		if names, ok := bound[gvk.Kind]; ok && !names[p.GetName()] {
			warnings = append(warnings, fmt.Sprintf("%s %s has no binding: it never applies, so no rules are generated for it", gvk.Kind, p.GetName()))
			continue
		}
		perr := func(err error) error { return &PolicyError{Index: i, Policy: p, Err: err} }
		if !slices.Contains(policyVersions, gvk.Version) {
			return nil, perr(fmt.Errorf("unsupported apiVersion %s (want %s/%s)", p.GetAPIVersion(), group, strings.Join(policyVersions, ", ")))
		}
		rules, err := policyRules(p)
		if err != nil {
			return nil, perr(err)
		}
		warnings = append(warnings, ruleWarnings(p, rules)...)
		warnings = append(warnings, o.excludedNamespaceWarnings(p, policies)...)
		if gvk.Kind == mutatingKind {
			mutating = append(mutating, rules...)
		} else {
			validating = append(validating, rules...)
		}
	}
	if len(mutating) == 0 && len(validating) == 0 {
		return nil, ErrNoPolicies
	}

	out := &Configurations{Warnings: warnings}
	if len(mutating) > 0 {
		out.Mutating = o.mutating(mergeRules(mutating))
	}
	if len(validating) > 0 {
		out.Validating = o.validating(mergeRules(validating))
	}
	return out, nil
}

// boundPolicies returns, per policy kind with at least one binding among
// objs, the names of the policies the bindings name.
func boundPolicies(objs []*unstructured.Unstructured) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		kind, ok := strings.CutSuffix(gvk.Kind, "Binding")
		if gvk.Group != group || !ok || (kind != mutatingKind && kind != validatingKind) {
			continue
		}
		if out[kind] == nil {
			out[kind] = map[string]bool{}
		}
		name, _, _ := unstructured.NestedString(o.Object, "spec", "policyName")
		out[kind][name] = true
	}
	return out
}

// complete validates opts and fills in the defaults.
func (opts Options) complete() (Options, error) {
	o := opts
	if o.Name == "" {
		o.Name = DefaultName
	}
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return o, fmt.Errorf("name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if o.TimeoutSeconds < 1 || o.TimeoutSeconds > 30 {
		return o, fmt.Errorf("timeout %ds: the API server allows 1 to 30 seconds", o.TimeoutSeconds)
	}
	switch {
	case o.Service != nil && o.URL != "":
		return o, errors.New("a Service and a URL: give one or the other")
	case o.Service != nil:
		s := *o.Service
		if s.Port == 0 {
			s.Port = DefaultPort
		}
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return o, fmt.Errorf("service namespace %q: %s", s.Namespace, strings.Join(errs, "; "))
		}
		if errs := validation.IsDNS1035Label(s.Name); len(errs) > 0 {
			return o, fmt.Errorf("service name %q: %s", s.Name, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidPortNum(int(s.Port)); len(errs) > 0 {
			return o, fmt.Errorf("service port %d: %s", s.Port, strings.Join(errs, "; "))
		}
		o.Service = &s
		if o.Namespace == "" {
			o.Namespace = s.Namespace
		}
	case o.URL != "":
		if err := checkURL(o.URL); err != nil {
			return o, err
		}
		o.URL = strings.TrimSuffix(o.URL, "/")
	default:
		return o, errors.New("neither a Service nor a URL: the API server needs to know where to call")
	}
	if o.Namespace != "" {
		if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
			return o, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
		}
	}
	if err := CheckCABundle(o.CABundle); err != nil {
		return o, err
	}
	return o, nil
}

// checkURL applies the API server's rules for a webhook URL early, with a
// clearer message than the configuration's validation error.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("url %q: the API server calls webhooks over https only", raw)
	case u.Host == "":
		return fmt.Errorf("url %q: no host", raw)
	case u.User != nil:
		return fmt.Errorf("url %q: user information is not allowed", raw)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("url %q: a query is not allowed", raw)
	case u.Fragment != "":
		return fmt.Errorf("url %q: a fragment is not allowed", raw)
	}
	return nil
}

// CheckCABundle requires at least one certificate and nothing but
// certificates: a private key pasted by mistake would be published in a
// cluster-readable object.
func CheckCABundle(bundle []byte) error {
	if len(bundle) == 0 {
		return errors.New("no CA bundle: the API server verifies the webhook's serving certificate with it")
	}
	rest := bundle
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("CA bundle holds a PEM block of type %s; only CERTIFICATE blocks belong in a caBundle", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("CA bundle certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("CA bundle holds no PEM certificate")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return fmt.Errorf("CA bundle: unexpected data after certificate %d", n)
	}
	return nil
}

func (o Options) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	// Nothing shared between the two configurations or with the caller.
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: bytes.Clone(o.CABundle)}
	if o.Service != nil {
		cc.Service = &admissionregistrationv1.ServiceReference{
			Namespace: o.Service.Namespace,
			Name:      o.Service.Name,
			Path:      &path,
			Port:      new(o.Service.Port),
		}
	} else {
		u := o.URL + path
		cc.URL = &u
	}
	return cc
}

// namespaceSelector excludes kube-system and the webhook's own namespace:
// with failurePolicy Fail and the webhook down, pods there could not be
// recreated, the webhook's own included ("the policy engine cannot
// restart").
func (o Options) namespaceSelector() *metav1.LabelSelector {
	values := []string{systemNamespace}
	if o.Namespace != "" && o.Namespace != systemNamespace {
		values = append(values, o.Namespace)
	}
	slices.Sort(values)
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: values,
	}}}
}

// excludedNamespaceWarnings says when a policy, or one of its bindings,
// selects kube-system or the webhook's own namespace with a namespaceSelector
// of its own: the webhook never sees writes there (namespaceSelector
// above), so the policy does not apply where it asks to. Selectors left
// empty (every namespace) are not warned about; ruleWarnings covers
// wildcard policies.
func (o Options) excludedNamespaceWarnings(p *unstructured.Unstructured, objs []*unstructured.Unstructured) []string {
	excluded := o.namespaceSelector().MatchExpressions[0].Values
	type selecting struct {
		who  string
		path []string
		obj  *unstructured.Unstructured
	}
	id := fmt.Sprintf("%s %q", p.GetKind(), p.GetName())
	candidates := []selecting{{who: id, path: []string{"spec", "matchConstraints", "namespaceSelector"}, obj: p}}
	for _, b := range objs {
		name, _, _ := unstructured.NestedString(b.Object, "spec", "policyName")
		if b.GetKind() == p.GetKind()+"Binding" && b.GroupVersionKind().Group == group && name == p.GetName() {
			candidates = append(candidates, selecting{who: fmt.Sprintf("its binding %q", b.GetName()),
				path: []string{"spec", "matchResources", "namespaceSelector"}, obj: b})
		}
	}
	var out []string
	for _, c := range candidates {
		raw, found, _ := unstructured.NestedMap(c.obj.Object, c.path...)
		if !found || len(raw) == 0 {
			continue
		}
		var ls metav1.LabelSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
			continue // the API server refuses it; not this warning's to say
		}
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil || sel.Empty() {
			continue
		}
		var hit []string
		for _, ns := range excluded {
			// The name label is the one label every namespace has.
			if sel.Matches(labels.Set{namespaceNameLabel: ns}) {
				hit = append(hit, ns)
			}
		}
		if len(hit) > 0 {
			out = append(out, fmt.Sprintf("%s: %s selects namespace %s (%s), which the webhook excludes so that it can restart "+
				"while the webhook is down: the policy does not apply there; install it in the API server if it must",
				id, c.who, strings.Join(hit, " and "), strings.Join(c.path[1:], ".")))
		}
	}
	return out
}

func (o Options) typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: kind}
}

// The webhook names are qualified names under truce.dev, as the API server
// requires (at least three DNS labels); they name the webhook in the API
// server's metrics and audit annotations.
func (o Options) webhookName(phase string) string { return o.Name + "." + phase + ".truce.dev" }

func (o Options) mutating(rules []rule) *admissionregistrationv1.MutatingWebhookConfiguration {
	// Fail open: a mutation is a convenience, an outage of the webhook must
	// not block writes; validation (fail closed) checks the final state.
	failure := admissionregistrationv1.Ignore
	// IfNeeded: another mutator may change the object after truce did; the
	// policies are idempotent (apply configurations, JSON patches re-derived
	// from the object), so a second call converges.
	reinvocation := admissionregistrationv1.IfNeededReinvocationPolicy
	w := admissionregistrationv1.MutatingWebhook{
		Name:                    o.webhookName("mutate"),
		ClientConfig:            o.clientConfig(MutatePath),
		Rules:                   webhookRules(rules),
		FailurePolicy:           &failure,
		ReinvocationPolicy:      &reinvocation,
		NamespaceSelector:       o.namespaceSelector(),
		ObjectSelector:          &metav1.LabelSelector{},
		MatchConditions:         matchConditions(rules),
		TimeoutSeconds:          new(o.TimeoutSeconds),
		SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		MatchPolicy:             new(admissionregistrationv1.Equivalent),
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   o.typeMeta("MutatingWebhookConfiguration"),
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{w},
	}
}

func (o Options) validating(rules []rule) *admissionregistrationv1.ValidatingWebhookConfiguration {
	// Fail closed: a validating policy is an enforcement boundary; the
	// namespace exclusions, replicas and PodDisruptionBudget of deploy/ are
	// what keep that from blocking the cluster.
	failure := admissionregistrationv1.Fail
	w := admissionregistrationv1.ValidatingWebhook{
		Name:                    o.webhookName("validate"),
		ClientConfig:            o.clientConfig(ValidatePath),
		Rules:                   webhookRules(rules),
		FailurePolicy:           &failure,
		NamespaceSelector:       o.namespaceSelector(),
		ObjectSelector:          &metav1.LabelSelector{},
		MatchConditions:         matchConditions(rules),
		TimeoutSeconds:          new(o.TimeoutSeconds),
		SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		MatchPolicy:             new(admissionregistrationv1.Equivalent),
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   o.typeMeta("ValidatingWebhookConfiguration"),
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{w},
	}
}

// matchConditions excludes Leases when a rule can match them.
func matchConditions(rules []rule) []admissionregistrationv1.MatchCondition {
	for _, r := range rules {
		if r.matchesLeases() {
			return []admissionregistrationv1.MatchCondition{{Name: ExcludeLeasesCondition, Expression: excludeLeasesExpression}}
		}
	}
	return nil
}

func webhookRules(rules []rule) []admissionregistrationv1.RuleWithOperations {
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(rules))
	for _, r := range rules {
		ops := make([]admissionregistrationv1.OperationType, 0, len(r.operations))
		for _, op := range r.operations {
			ops = append(ops, admissionregistrationv1.OperationType(op))
		}
		out = append(out, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups:   slices.Clone(r.apiGroups),
				APIVersions: slices.Clone(r.apiVersions),
				Resources:   slices.Clone(r.resources),
				Scope:       new(admissionregistrationv1.ScopeType(r.scope)),
			},
		})
	}
	return out
}

// policyRules reads a policy's spec.matchConstraints.resourceRules.
// resourceNames are dropped (webhook rules have none; the server matches
// them) and excludeResourceRules are ignored for the same reason.
func policyRules(p *unstructured.Unstructured) ([]rule, error) {
	raw, found, err := unstructured.NestedMap(p.Object, "spec", "matchConstraints")
	if err != nil {
		return nil, fmt.Errorf("spec.matchConstraints: %w", err)
	}
	if !found {
		return nil, errors.New("no spec.matchConstraints: the API server requires them, and the webhook would not know what to match")
	}
	var mc admissionregistrationv1.MatchResources
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &mc); err != nil {
		return nil, fmt.Errorf("spec.matchConstraints: %w", err)
	}
	if len(mc.ResourceRules) == 0 {
		return nil, errors.New("no spec.matchConstraints.resourceRules: the API server requires at least one")
	}
	rules := make([]rule, 0, len(mc.ResourceRules))
	for i, rr := range mc.ResourceRules {
		r := rule{
			apiGroups:   normalize(rr.APIGroups),
			apiVersions: normalize(rr.APIVersions),
			resources:   normalizeResources(rr.Resources),
			scope:       string(admissionregistrationv1.AllScopes),
		}
		for _, op := range rr.Operations {
			r.operations = append(r.operations, string(op))
		}
		r.operations = normalize(r.operations)
		if rr.Scope != nil && *rr.Scope != "" {
			r.scope = string(*rr.Scope)
		}
		for _, dim := range []struct {
			name string
			xs   []string
		}{{"operations", r.operations}, {"apiGroups", r.apiGroups}, {"apiVersions", r.apiVersions}, {"resources", r.resources}} {
			if len(dim.xs) == 0 {
				return nil, fmt.Errorf("spec.matchConstraints.resourceRules[%d].%s is empty: the rule matches nothing", i, dim.name)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ruleWarnings says what a policy's rules reach that the webhook does not.
func ruleWarnings(p *unstructured.Unstructured, rules []rule) []string {
	id := fmt.Sprintf("%s %q", p.GetKind(), p.GetName())
	var wildcard, leases bool
	var groups, exempt []string
	add := func(xs *[]string, x string) {
		if !slices.Contains(*xs, x) {
			*xs = append(*xs, x)
		}
	}
	for _, r := range rules {
		if r.namesLeases() {
			leases = true
		}
		if !r.matchesAllResources() {
			continue
		}
		wildcard = true
		for _, g := range r.apiGroups {
			add(&groups, fmt.Sprintf("%q", g))
		}
		if coversList(r.apiGroups, group) {
			add(&exempt, "webhook configurations and admission policies and their bindings "+
				"(the API server never sends them to webhooks, so that a broken webhook cannot block its own repair)")
		}
		if coversList(r.apiGroups, "authentication.k8s.io") || coversList(r.apiGroups, "authorization.k8s.io") {
			add(&exempt, "TokenReviews and access reviews (not persisted, never sent to webhooks)")
		}
		if r.matchesLeases() {
			add(&exempt, "coordination.k8s.io Leases (matchCondition "+ExcludeLeasesCondition+
				": node heartbeats and leader election must not wait on a webhook)")
		}
	}
	var out []string
	if wildcard {
		exempt = append(exempt, "anything in kube-system or the webhook's own namespace (namespaceSelector), "+
			"so that both can restart while the webhook is down")
		out = append(out, fmt.Sprintf("%s matches every resource (*) of API groups %s: the webhook is called for all "+
			"of them (the server matches the policy itself) except %s", id, strings.Join(groups, ", "), strings.Join(exempt, "; ")))
	}
	if leases {
		out = append(out, id+" matches coordination.k8s.io Leases: the webhook excludes them (matchCondition "+
			ExcludeLeasesCondition+"), node heartbeats and leader election must not wait on a webhook; "+
			"install the policy in the API server if it must apply to Leases")
	}
	return out
}
