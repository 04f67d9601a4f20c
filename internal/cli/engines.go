package cli

import (
	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/gatekeeper"
	"github.com/truce-dev/truce/manifest"
)

// policyEngines returns the policy engines truce runs itself for a cluster
// and repository holding objs: each engine whose own objects appear among
// them, as the real engine is installed where its policies are.
func policyEngines(objs ...[]manifest.Object) ([]admission.PolicyEngine, error) {
	uses := func(owns func(group string) bool) bool {
		for _, list := range objs {
			for _, o := range list {
				if o.Object != nil && owns(o.Object.GroupVersionKind().Group) {
					return true
				}
			}
		}
		return false
	}
	var engines []admission.PolicyEngine
	if uses(gatekeeper.Reads) {
		e, err := gatekeeper.New()
		if err != nil {
			return nil, err
		}
		engines = append(engines, e)
	}
	return engines, nil
}
