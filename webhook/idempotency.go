package webhook

import (
	"context"
	"fmt"
	"strings"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// checkIdempotent refuses mutations that change their own result: the API
// server reinvokes a webhook (reinvocationPolicy IfNeeded) and GitOps tools
// re-apply objects, so a mutation that is not idempotent appends a sidecar
// or a suffix again on every pass. Each probe object is mutated, then its
// result is mutated again; the second pass must change nothing.
//
// The probes are the objects of the cluster paths and, for every kind the
// mutating policies match, a small object of that kind in every namespace
// of the state, labelled with the labels the policies and bindings select
// on. A mutation that only misbehaves on shapes no probe has is not found:
// this refuses what it can show, it proves nothing.
func checkIdempotent(ctx context.Context, chain *admission.Chain, samples []manifest.Object) error {
	for _, p := range admission.Probes(chain.State(), samples) {
		first, err := chain.Mutate(ctx, p.Review(p.Body))
		if err != nil || !first.Allowed || first.Object == nil {
			// Not matched, denied or not evaluable: nothing to compare.
			continue
		}
		second, err := chain.Mutate(ctx, p.Review(first.Object))
		if err != nil || !second.Allowed || second.Object == nil {
			continue
		}
		var fields []string
		for _, c := range second.Changes {
			fields = append(fields, fmt.Sprintf("%s (by %s)", c.Path, c.By))
		}
		if len(fields) == 0 {
			continue
		}
		return fmt.Errorf("the mutations are not idempotent: mutating the result of mutating %s changes it again: %s; "+
			"a mutation must leave its own result unchanged (guard appends with a matchCondition, set values instead of adding to them)",
			p.Source, strings.Join(fields, ", "))
	}
	return nil
}
