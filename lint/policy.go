package lint

import (
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

	"github.com/truce-dev/truce/manifest"
)

// Rule ids of the admission policy rules.
const (
	RulePolicyWithoutBinding       = "policy-without-binding"
	RulePolicyBindingWithoutPolicy = "policy-binding-without-policy"
	RulePolicyBindingParamMissing  = "policy-binding-param-missing"
	RulePolicyBindingNeverDenies   = "policy-binding-never-denies"
)

const (
	validatingAdmissionPolicyKind = "ValidatingAdmissionPolicy"
	mutatingAdmissionPolicyKind   = "MutatingAdmissionPolicy"
	bindingSuffix                 = "Binding"
)

func policyRules() []Rule {
	return []Rule{
		{ID: RuleKubewardenNotEvaluated, Severity: SeverityInfo,
			Summary: "A Kubewarden policy whose PolicyServer webhook is not in the input: truce predicts without it",
			Check:   checkKubewardenNotEvaluated},
		{ID: RulePolicyWithoutBinding, Severity: SeverityWarning,
			Summary: "A Validating- or MutatingAdmissionPolicy that no binding uses: it does nothing",
			Check:   checkPolicyWithoutBinding},
		{ID: RulePolicyBindingWithoutPolicy, Severity: SeverityError,
			Summary: "A policy binding whose policyName names no policy",
			Check:   checkBindingWithoutPolicy},
		{ID: RulePolicyBindingParamMissing, Severity: SeverityError,
			Summary: "A policy binding whose paramRef finds no parameter object",
			Check:   checkBindingParamMissing},
		{ID: RulePolicyBindingNeverDenies, Severity: SeverityWarning,
			Summary: "An enforcing-looking ValidatingAdmissionPolicy whose bindings only Warn or Audit",
			Check:   checkBindingNeverDenies},
	}
}

// policyObject is a Validating- or MutatingAdmissionPolicy, or a binding of
// one, in any served version (the fields read here are the same in all).
type policyObject struct {
	obj  manifest.Object
	kind string // the policy's kind, also for bindings
}

func (p policyObject) name() string { return p.obj.Object.GetName() }

// policyName is a binding's spec.policyName.
func (p policyObject) policyName() string {
	s, _, _ := unstructured.NestedString(p.obj.Object.Object, "spec", "policyName")
	return s
}

// policiesAndBindings returns the admission policies and the bindings of the
// input.
func policiesAndBindings(in *Input) (policies, bindings []policyObject) {
	for _, o := range in.Objects {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group != admissionregistrationv1.GroupName {
			continue
		}
		switch gvk.Kind {
		case validatingAdmissionPolicyKind, mutatingAdmissionPolicyKind:
			policies = append(policies, policyObject{obj: o, kind: gvk.Kind})
		case validatingAdmissionPolicyKind + bindingSuffix, mutatingAdmissionPolicyKind + bindingSuffix:
			bindings = append(bindings, policyObject{obj: o, kind: strings.TrimSuffix(gvk.Kind, bindingSuffix)})
		}
	}
	return policies, bindings
}

const (
	whyPolicyWithoutBinding = "A policy without a binding does nothing: kube-apiserver evaluates a policy only for the requests one of its " +
		"bindings matches, with that binding's actions."
	fixPolicyWithoutBinding = "Add a %sBinding with spec.policyName: %s (and validationActions for a ValidatingAdmissionPolicy), or " +
		"delete the policy."
)

func checkPolicyWithoutBinding(_ context.Context, in *Input) ([]Finding, error) {
	policies, bindings := policiesAndBindings(in)
	var out []Finding
	for _, p := range policies {
		if slices.ContainsFunc(bindings, func(b policyObject) bool { return b.kind == p.kind && b.policyName() == p.name() }) {
			continue
		}
		msg := fmt.Sprintf("no %sBinding has policyName %q: the policy is never evaluated", p.kind, p.name())
		out = append(out, finding(p.obj, msg, whyPolicyWithoutBinding, fmt.Sprintf(fixPolicyWithoutBinding, p.kind, p.name())))
	}
	return out, nil
}

const (
	whyBindingWithoutPolicy = "A binding of a policy that does not exist enforces nothing; usually the policy name is misspelt or the policy " +
		"was renamed or never applied, and whatever the binding was meant to enforce is not enforced."
	fixBindingWithoutPolicy = "Set spec.policyName to the metadata.name of an existing %s, or apply that policy."
)

func checkBindingWithoutPolicy(_ context.Context, in *Input) ([]Finding, error) {
	policies, bindings := policiesAndBindings(in)
	var out []Finding
	for _, b := range bindings {
		if slices.ContainsFunc(policies, func(p policyObject) bool { return p.kind == b.kind && p.name() == b.policyName() }) {
			continue
		}
		msg := fmt.Sprintf("policyName %q names no %s", b.policyName(), b.kind)
		if close := nearestPolicy(policies, b); close != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", close)
		}
		out = append(out, finding(b.obj, msg, whyBindingWithoutPolicy, fmt.Sprintf(fixBindingWithoutPolicy, b.kind)))
	}
	return out, nil
}

// nearestPolicy returns a policy of the binding's kind whose name differs
// from the binding's policyName by case or one edit, or "".
func nearestPolicy(policies []policyObject, b policyObject) string {
	want := b.policyName()
	for _, p := range policies {
		if p.kind == b.kind && (strings.EqualFold(p.name(), want) || oneEdit(p.name(), want)) {
			return p.name()
		}
	}
	return ""
}

// oneEdit reports whether a and b differ by exactly one inserted, deleted
// or replaced byte.
func oneEdit(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(a)-len(b) > 1 || a == b {
		return false
	}
	i := 0
	for i < len(b) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		return a[i+1:] == b[i+1:]
	}
	return a[i+1:] == b[i:]
}

const (
	whyParamMissing = "When a binding's paramRef finds no parameter object, parameterNotFoundAction decides: Deny subjects every request " +
		"the binding matches to the policy's failurePolicy (with Fail: rejected), Allow skips the policy; either way the policy does not " +
		"do what its parameters say."
	fixParamMissing = "Create the %s the paramRef names, or correct paramRef (name, namespace or selector)."
)

// checkBindingParamMissing: a binding whose paramRef finds no object of the
// policy's paramKind. It only speaks when the input holds objects of that
// kind at all; otherwise the parameters may simply live elsewhere.
func checkBindingParamMissing(_ context.Context, in *Input) ([]Finding, error) {
	policies, bindings := policiesAndBindings(in)
	var out []Finding
	for _, b := range bindings {
		i := slices.IndexFunc(policies, func(p policyObject) bool { return p.kind == b.kind && p.name() == b.policyName() })
		if i < 0 {
			continue
		}
		p := policies[i]
		apiVersion, _, _ := unstructured.NestedString(p.obj.Object.Object, "spec", "paramKind", "apiVersion")
		kind, _, _ := unstructured.NestedString(p.obj.Object.Object, "spec", "paramKind", "kind")
		refMap, ok, _ := unstructured.NestedMap(b.obj.Object.Object, "spec", "paramRef")
		if kind == "" || !ok {
			continue
		}
		gv, err := k8sschema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.paramKind.apiVersion %q: %w", where(p.obj), apiVersion, err)
		}
		var ref admissionregistrationv1.ParamRef
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(refMap, &ref); err != nil {
			return nil, fmt.Errorf("%s: decoding spec.paramRef: %w", where(b.obj), err)
		}
		var params []manifest.Object
		for _, o := range in.Objects {
			if isKind(o, gv.Group, kind) {
				params = append(params, o)
			}
		}
		if len(params) == 0 {
			continue
		}
		found, err := paramFound(params, ref)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.paramRef.selector: %w", where(b.obj), err)
		}
		if found {
			continue
		}
		action := "Deny"
		if ref.ParameterNotFoundAction != nil {
			action = string(*ref.ParameterNotFoundAction)
		}
		what := describeParamRef(ref)
		effect := "every request the binding matches is subject to the policy's failurePolicy"
		if action == string(admissionregistrationv1.AllowAction) {
			effect = "the policy is skipped for every request"
		}
		msg := fmt.Sprintf("paramRef %s matches none of the %d %s objects in the input (parameterNotFoundAction %s: %s)", what, len(params), kind, action, effect)
		out = append(out, finding(b.obj, msg, whyParamMissing, fmt.Sprintf(fixParamMissing, kind)))
	}
	return out, nil
}

func paramFound(params []manifest.Object, ref admissionregistrationv1.ParamRef) (bool, error) {
	var sel labels.Selector
	if ref.Name == "" && ref.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return false, err
		}
		sel = s
	}
	for _, o := range params {
		// An empty paramRef.namespace means the namespace of the request:
		// any namespace may hold the parameter.
		if ref.Namespace != "" && o.Object.GetNamespace() != ref.Namespace {
			continue
		}
		switch {
		case ref.Name != "":
			if o.Object.GetName() == ref.Name {
				return true, nil
			}
		case sel != nil:
			if sel.Matches(labels.Set(o.Object.GetLabels())) {
				return true, nil
			}
		default:
			return true, nil
		}
	}
	return false, nil
}

func describeParamRef(ref admissionregistrationv1.ParamRef) string {
	var parts []string
	if ref.Name != "" {
		parts = append(parts, fmt.Sprintf("name %q", ref.Name))
	}
	if ref.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(ref.Selector); err == nil {
			parts = append(parts, fmt.Sprintf("selector %q", s.String()))
		}
	}
	if ref.Namespace != "" {
		parts = append(parts, fmt.Sprintf("namespace %q", ref.Namespace))
	}
	return strings.Join(parts, ", ")
}

const (
	whyNeverDenies = "validationActions decide what a failed validation does: Deny rejects, Warn returns a warning to the client, Audit " +
		"records an audit annotation. A policy written to enforce (failurePolicy Fail, validations with messages) that is bound only with " +
		"Warn or Audit never rejects anything: the policy has no effect."
	fixNeverDenies = "Once the manifests comply, add Deny to validationActions ([Deny], or [Deny, Audit]); keep Warn/Audit only for a " +
		"deliberate rollout, and then say so by setting the policy's failurePolicy to Ignore until it enforces."
)

// checkBindingNeverDenies: a ValidatingAdmissionPolicy that looks like
// enforcement (explicit failurePolicy Fail and validations with messages)
// while none of its bindings has the Deny action. The heuristic stays
// quiet when any binding denies: Warn in some namespaces and Deny in others
// is a normal rollout.
func checkBindingNeverDenies(_ context.Context, in *Input) ([]Finding, error) {
	policies, bindings := policiesAndBindings(in)
	var out []Finding
	for _, p := range policies {
		if p.kind != validatingAdmissionPolicyKind || !looksEnforcing(p.obj.Object) {
			continue
		}
		var mine []policyObject
		denies := false
		for _, b := range bindings {
			if b.kind != p.kind || b.policyName() != p.name() {
				continue
			}
			mine = append(mine, b)
			actions, _, _ := unstructured.NestedStringSlice(b.obj.Object.Object, "spec", "validationActions")
			if slices.Contains(actions, string(admissionregistrationv1.Deny)) {
				denies = true
			}
		}
		if denies {
			continue
		}
		for _, b := range mine {
			actions, _, _ := unstructured.NestedStringSlice(b.obj.Object.Object, "spec", "validationActions")
			msg := fmt.Sprintf("validationActions %v never deny, nor does any other binding of ValidatingAdmissionPolicy %q, whose failurePolicy Fail and validation messages say it enforces",
				actions, p.name())
			out = append(out, finding(b.obj, msg, whyNeverDenies, fixNeverDenies))
		}
	}
	return out, nil
}

// looksEnforcing: failurePolicy written as Fail, and at least one
// validation with a message for the rejected user.
func looksEnforcing(p *unstructured.Unstructured) bool {
	fp, _, _ := unstructured.NestedString(p.Object, "spec", "failurePolicy")
	if fp != string(admissionregistrationv1.Fail) {
		return false
	}
	validations, _, _ := unstructured.NestedSlice(p.Object, "spec", "validations")
	for _, v := range validations {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if msg, _ := m["message"].(string); msg != "" {
			return true
		}
		if expr, _ := m["messageExpression"].(string); expr != "" {
			return true
		}
	}
	return false
}
