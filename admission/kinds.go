package admission

import k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

// ConfigurationKinds are the kinds that configure admission of later
// writes: the admission policies, their bindings and the webhook
// configurations (admissionregistration.k8s.io/v1). What a cluster holds
// of them is what truce reads to replay its admission.
var ConfigurationKinds = []k8sschema.GroupVersionKind{
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
}

// IsConfigurationKindName reports whether kind is the name of one of
// ConfigurationKinds, in any group: a cheap first test.
func IsConfigurationKindName(kind string) bool {
	for _, k := range ConfigurationKinds {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

// IsConfigurationKind reports whether gk is one of ConfigurationKinds, in
// any version.
func IsConfigurationKind(gk k8sschema.GroupKind) bool {
	for _, k := range ConfigurationKinds {
		if k.GroupKind() == gk {
			return true
		}
	}
	return false
}
