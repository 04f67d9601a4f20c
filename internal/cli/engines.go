package cli

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno"
	"github.com/truce-dev/truce/manifest"
)

// engines returns the policy engines truce runs itself for a cluster
// whose objects (the -c files, the repository) are objs: Kyverno when
// they hold Kyverno policies.
func engines(objs ...[]manifest.Object) []admission.PolicyEngine {
	var out []admission.PolicyEngine
	for _, list := range objs {
		us := make([]*unstructured.Unstructured, len(list))
		for i, o := range list {
			us[i] = o.Object
		}
		if kyverno.HasPolicies(us) {
			out = append(out, kyverno.Shared())
			break
		}
	}
	return out
}
