package lint

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	webhookplugin "k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	admissionregistrationvalidation "k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
	"k8s.io/kubernetes/pkg/kubeapiserver/admission/exclusion"

	"github.com/truce-dev/truce/schema"
)

// namespaceNameLabel is set by kube-apiserver on every namespace to its name
// (and cannot be changed), which is what makes it a reliable exclusion key.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// namespaceLabels returns the labels a namespaceSelector is evaluated
// against for namespace ns: those of the Namespace object when the input
// has it, plus kubernetes.io/metadata.name, which the API server always sets.
func namespaceLabels(in *Input, ns string) labels.Set {
	set := labels.Set{}
	for _, o := range in.Objects {
		if isKind(o, "", "Namespace") && o.Object.GetName() == ns {
			for k, v := range o.Object.GetLabels() {
				set[k] = v
			}
		}
	}
	set[namespaceNameLabel] = ns
	return set
}

// selectorMatches evaluates a webhook's label selector the way
// kube-apiserver does. A nil selector matches everything: v1 defaults it to
// {}.
func selectorMatches(sel *metav1.LabelSelector, set labels.Set) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, fmt.Errorf("invalid label selector: %w", err)
	}
	return s.Matches(set), nil
}

// selectorIsEmpty reports whether a selector selects everything ({} or
// unset).
func selectorIsEmpty(sel *metav1.LabelSelector) bool {
	return sel == nil || len(sel.MatchLabels)+len(sel.MatchExpressions) == 0
}

// probe is a request kube-apiserver could send to a webhook: what its rules
// are matched against. A "*" in a field stands for "some resource that only
// a wildcard matches", so probes made from wildcard rules match wildcard
// rules only.
type probe struct {
	gvr         k8sschema.GroupVersionResource
	subresource string
	kind        k8sschema.GroupVersionKind
	namespace   string
	op          admission.Operation
	// For matchConditions: the request's object, old object, name and
	// user, when the probe stands for a concrete request.
	name              string
	object, oldObject *unstructured.Unstructured
	user              user.Info
}

func (p probe) attributes() admission.Attributes {
	var obj, old runtime.Object
	if p.object != nil {
		obj = p.object
	}
	if p.oldObject != nil {
		old = p.oldObject
	}
	return admission.NewAttributesRecord(obj, old, p.kind, p.namespace, cmp.Or(p.name, "probe"), p.gvr, p.subresource, p.op, nil, false, p.user)
}

// conditionEvaluator evaluates webhooks' matchConditions as kube-apiserver
// does: its CEL condition compiler and its webhook matcher.
type conditionEvaluator struct {
	compiler celplugin.ConditionCompiler
}

func newConditionEvaluator() conditionEvaluator {
	return conditionEvaluator{compiler: celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))}
}

// reaches reports whether a request that w's rules and selectors match
// gets past its matchConditions: the webhook is called, or, when a
// condition cannot be evaluated and the webhook fails closed, the request
// is rejected without calling it. Either way the write depends on the
// webhook.
func (e conditionEvaluator) reaches(ctx context.Context, c webhookConfig, w webhook, p probe) bool {
	if len(w.matchConditions) == 0 {
		return true
	}
	accessor := webhookplugin.NewValidatingWebhookAccessor("lint", c.obj.Object.GetName(), &admissionregistrationv1.ValidatingWebhook{
		Name: w.name, FailurePolicy: w.failurePolicy, MatchConditions: w.matchConditions,
	})
	attr := &admission.VersionedAttributes{Attributes: p.attributes(), VersionedKind: p.kind}
	if p.object != nil {
		attr.VersionedObject = admission.NewLazyObject(p.object)
	}
	if p.oldObject != nil {
		attr.VersionedOldObject = admission.NewLazyObject(p.oldObject)
	}
	res := accessor.GetCompiledMatcher(e.compiler).Match(ctx, attr, nil, nil)
	return res.Matches || res.Error != nil
}

// ruleMatches matches one webhook rule against a probe with kube-apiserver's
// own matcher. With matchPolicy Equivalent (the default) the server also
// sends a resource through any other version it serves, so versions are not
// compared.
func ruleMatches(r admissionregistrationv1.RuleWithOperations, policy *admissionregistrationv1.MatchPolicyType, p probe) bool {
	if policy == nil || *policy == admissionregistrationv1.Equivalent {
		r.APIVersions = []string{"*"}
	}
	m := rules.Matcher{Rule: r, Attr: p.attributes()}
	return m.Matches()
}

// allOperations are the operations "*" stands for.
var allOperations = []admission.Operation{admission.Create, admission.Update, admission.Delete, admission.Connect}

// probesOf turns a webhook rule into the probes it names: each group,
// version, resource and operation it lists (wildcards kept as "*"), in a
// namespace and at cluster scope.
func probesOf(r admissionregistrationv1.RuleWithOperations) []probe {
	var ops []admission.Operation
	for _, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll {
			ops = allOperations
			break
		}
		ops = append(ops, admission.Operation(op))
	}
	var out []probe
	for _, g := range r.APIGroups {
		for _, v := range r.APIVersions {
			for _, res := range r.Resources {
				name, sub, _ := strings.Cut(res, "/")
				gvr := k8sschema.GroupVersionResource{Group: g, Version: v, Resource: name}
				for _, op := range ops {
					for _, ns := range []string{"", "probe"} {
						out = append(out, probe{gvr: gvr, subresource: sub, namespace: ns, op: op})
					}
				}
			}
		}
	}
	return out
}

// namesAll reports whether a rule is a `*/*`-style wildcard: every group
// and every resource.
func namesAll(r admissionregistrationv1.RuleWithOperations) bool {
	return slices.Contains(r.APIGroups, "*") && (slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "*/*"))
}

// internalRules converts rules to the internal types the upstream
// validation helpers take.
func internalRules(in []admissionregistrationv1.RuleWithOperations) []admissionregistration.RuleWithOperations {
	out := make([]admissionregistration.RuleWithOperations, len(in))
	for i, r := range in {
		ops := make([]admissionregistration.OperationType, len(r.Operations))
		for j, op := range r.Operations {
			ops[j] = admissionregistration.OperationType(op)
		}
		var scope *admissionregistration.ScopeType
		if r.Scope != nil {
			s := admissionregistration.ScopeType(*r.Scope)
			scope = &s
		}
		out[i] = admissionregistration.RuleWithOperations{
			Operations: ops,
			Rule: admissionregistration.Rule{
				APIGroups: r.APIGroups, APIVersions: r.APIVersions, Resources: r.Resources, Scope: scope,
			},
		}
	}
	return out
}

// neverSentWarnings returns kube-apiserver's own warnings for the rules of
// one webhook that name resources in excluded (e.g. "webhooks[0].rules[1]:
// tokenreviews.authentication.k8s.io is excluded from admission webhooks;
// this rule will have no effect"), with the webhook's real index.
func neverSentWarnings(index int, in []admissionregistrationv1.RuleWithOperations, excluded []k8sschema.GroupResource) []string {
	if len(excluded) == 0 {
		return nil
	}
	hooks := []admissionregistration.ValidatingWebhook{{Rules: internalRules(in)}}
	ws := admissionregistrationvalidation.WarningsForValidatingWebhookRules(hooks, excluded)
	for i, w := range ws {
		ws[i] = fmt.Sprintf("webhooks[%d]%s", index, strings.TrimPrefix(w, "webhooks[0]"))
	}
	return ws
}

// virtualResources are the non-persisted review resources kube-apiserver
// 1.37 never sends to webhooks (ExcludeAdmissionWebhookVirtualResources,
// on by default): the list the API server itself is configured with.
func virtualResources() []k8sschema.GroupResource { return exclusion.Excluded() }

// admissionConfigResources are the built-in resources whose writes
// kube-apiserver never sends to webhooks from the API (webhook
// configurations, admission policies and their bindings), found by asking
// the API server's own predicate about every resource it serves.
func admissionConfigResources() ([]k8sschema.GroupResource, error) {
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("loading the built-in resources: %w", err)
	}
	var out []k8sschema.GroupResource
	for _, res := range reg.Resources() {
		attr := admission.NewAttributesRecord(nil, nil, res.GVK(), "", "", res.GVR, "", admission.Create, nil, false, nil)
		if gr := res.GVR.GroupResource(); rules.IsExemptAdmissionConfigurationResource(attr) && !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	return out, nil
}

// clusterScopedBuiltins returns the built-in resources that are not
// namespaced (namespaces excepted, whose own labels a namespaceSelector
// sees), by group and resource.
func clusterScopedBuiltins() (map[k8sschema.GroupResource]bool, error) {
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("loading the built-in resources: %w", err)
	}
	out := map[k8sschema.GroupResource]bool{}
	for _, res := range reg.Resources() {
		gr := res.GVR.GroupResource()
		if !res.Namespaced && gr != (k8sschema.GroupResource{Resource: "namespaces"}) {
			out[gr] = true
		}
	}
	return out, nil
}

// onlyClusterScoped reports whether every rule of a webhook can only match
// cluster-scoped resources, which a namespace's webhook outage cannot
// block: scope Cluster, or only built-in cluster-scoped resources named.
func onlyClusterScoped(rs []admissionregistrationv1.RuleWithOperations, clusterScoped map[k8sschema.GroupResource]bool) bool {
	for _, r := range rs {
		if r.Scope != nil && *r.Scope == admissionregistrationv1.ClusterScope {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name, _, _ := strings.Cut(res, "/")
				if !clusterScoped[k8sschema.GroupResource{Group: g, Resource: name}] {
					return false
				}
			}
		}
	}
	return true
}
