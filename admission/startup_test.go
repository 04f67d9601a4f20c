package admission_test

import (
	"testing"

	"github.com/truce-dev/truce/admission"
)

// TestChainMutatesAtOnce: a chain's MutatingAdmissionPolicies apply from
// its first write, with or without a Cache. Chains without one used
// upstream's type converter manager, which knows no schema until a
// background goroutine has polled the OpenAPI paths once; a chain
// admitting before that refused the write with a 503 ("Resource kind
// /v1, Kind=Pod not found"), as a webhook test did under CI load.
func TestChainMutatesAtOnce(t *testing.T) {
	cluster := mapPolicy("label", "configmaps", setMutatedLabel, "")
	cache := admission.NewCache(0)
	for _, tc := range []struct {
		name string
		opts admission.Options
	}{{"without cache", admission.Options{}}, {"shared cache", admission.Options{Cache: cache}}} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 5 {
				c := newChain(t, tc.opts, cluster)
				res := admit(t, c, admission.Request{Object: object(t, cmWith("c", "default", nil, nil))})
				if !res.Allowed {
					t.Fatalf("chain %d refused its first write: %s", i, res.Message)
				}
				labels, _ := res.Object["metadata"].(map[string]any)["labels"].(map[string]any)
				if got := labels["mutated"]; got != "yes" {
					t.Fatalf("chain %d: label mutated = %v, want the policy's \"yes\"", i, got)
				}
				c.Close()
			}
		})
	}
}
