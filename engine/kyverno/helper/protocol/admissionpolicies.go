package protocol

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OpAdmissionPolicies runs Kyverno's admission policy generator (version
// 4): the ValidatingAdmissionPolicies and MutatingAdmissionPolicies, with
// their bindings, Kyverno writes for the policies that ask for them, and
// the status it writes on each policy it considered.
const OpAdmissionPolicies = "admissionPolicies"

// AdmissionPoliciesRequest is the body of OpAdmissionPolicies.
type AdmissionPoliciesRequest struct {
	// Objects are ClusterPolicies, ValidatingPolicies, MutatingPolicies
	// (cluster-wide and namespaced) and PolicyExceptions (both groups).
	Objects []json.RawMessage `json:"objects"`
	// Resources is the cluster's discovery: it says which admission policy
	// versions the cluster serves and maps a ClusterPolicy's kinds to
	// resources.
	Resources []*metav1.APIResourceList `json:"resources"`
	// GenerateValidatingAdmissionPolicy and GenerateMutatingAdmissionPolicy
	// are Kyverno's --generateValidatingAdmissionPolicy and
	// --generateMutatingAdmissionPolicy flags.
	GenerateValidatingAdmissionPolicy bool `json:"generateValidatingAdmissionPolicy"`
	GenerateMutatingAdmissionPolicy   bool `json:"generateMutatingAdmissionPolicy"`
}

// AdmissionPolicyStatus is what Kyverno's generator wrote on a policy:
// for a ClusterPolicy status.validatingadmissionpolicy, for the CEL kinds
// status.generated and the condition status' message.
type AdmissionPolicyStatus struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Generated bool   `json:"generated"`
	Message   string `json:"message,omitempty"`
}

// AdmissionPoliciesResponse is OpAdmissionPolicies' answer.
type AdmissionPoliciesResponse struct {
	// Objects are the generated policies and bindings as Kyverno creates
	// them (names, labels, owner references), with apiVersion and kind.
	Objects  []json.RawMessage       `json:"objects,omitempty"`
	Statuses []AdmissionPolicyStatus `json:"statuses,omitempty"`
	// Warnings name policies whose generation did not finish (Kyverno
	// retried and gave up): they stay with Kyverno's webhook.
	Warnings []string `json:"warnings,omitempty"`
}
