package admission

import (
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// mutatingPolicies names the MutatingAdmissionPolicy bindings that apply to
// a request, using the upstream policy matcher (matchConstraints, binding
// matchResources, namespace and object selectors). The plugin does not say
// which policy made which change, so truce names the binding when exactly
// one matched, and every candidate otherwise.
type mutatingPolicies struct {
	matcher  generic.PolicyMatcher
	policies map[string]*admissionregistrationv1.MutatingAdmissionPolicy
	bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
}

func newMutatingPolicies(state *State, namespaces listersv1.NamespaceLister, client kubernetes.Interface) (*mutatingPolicies, error) {
	m := &mutatingPolicies{
		matcher:  generic.NewPolicyMatcher(matching.NewMatcher(namespaces, client)),
		policies: map[string]*admissionregistrationv1.MutatingAdmissionPolicy{},
	}
	for _, o := range state.Objects() {
		if o.GroupVersionKind().Group != "admissionregistration.k8s.io" {
			continue
		}
		switch o.GetKind() {
		case "MutatingAdmissionPolicy":
			p := &admissionregistrationv1.MutatingAdmissionPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, p); err != nil {
				return nil, fmt.Errorf("decoding MutatingAdmissionPolicy %s: %w", o.GetName(), err)
			}
			m.policies[p.Name] = p
		case "MutatingAdmissionPolicyBinding":
			b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
				return nil, fmt.Errorf("decoding MutatingAdmissionPolicyBinding %s: %w", o.GetName(), err)
			}
			m.bindings = append(m.bindings, b)
		}
	}
	sort.Slice(m.bindings, func(i, j int) bool { return m.bindings[i].Name < m.bindings[j].Name })
	return m, nil
}

// candidates returns the step of every binding whose policy and binding
// match the request.
func (m *mutatingPolicies) candidates(a k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) []Step {
	var out []Step
	for _, b := range m.bindings {
		p, ok := m.policies[b.Spec.PolicyName]
		if !ok {
			continue
		}
		if ok, _, _, err := m.matcher.DefinitionMatches(a, o, mutating.NewMutatingAdmissionPolicyAccessor(p)); err != nil || !ok {
			continue
		}
		if ok, err := m.matcher.BindingMatches(a, o, mutating.NewMutatingAdmissionPolicyBindingAccessor(b)); err != nil || !ok {
			continue
		}
		out = append(out, Step{Kind: PolicyStep, Name: p.Name, Binding: b.Name})
	}
	return out
}

// recordPolicyCandidates records the bindings that match the request when
// the MutatingAdmissionPolicy plugin changed the object, for attributing
// its changes.
func (c *Chain) recordPolicyCandidates(rec *recorder, attrs k8sadmission.Attributes) {
	for _, st := range rec.steps {
		if st.plugin == "MutatingAdmissionPolicy" {
			rec.mutatingPolicies = c.mutatingPolicies.candidates(attrs, c.objects)
			return
		}
	}
}

// policyStep is the attribution for a change made inside the plugin.
func policyStep(candidates []Step) Step {
	switch len(candidates) {
	case 0:
		return Step{Kind: PolicyStep}
	case 1:
		return candidates[0]
	default:
		return Step{Kind: PolicyStep, Candidates: candidates}
	}
}
