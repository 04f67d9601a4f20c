package gatekeeper

import (
	"errors"
	"fmt"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
)

// TestExternalDataUnresolved tells Gatekeeper's failure to resolve
// external data (truce calls no provider) from the failures its webhook
// answers with a denial.
func TestExternalDataUnresolved(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"none", nil, false},
		{"resolution", fmt.Errorf("failed to resolve external data placeholders: %w", errors.New("failed to get client TLS certificate")), true},
		{"not converging", fmt.Errorf("mutating: %w", mutation.ErrNotConverging), false},
		{"a mutator failing", errors.New("mutation 1 for mutator Assign.mutations.gatekeeper.sh /wrong failed for apps Deployment shop web: mismatch"), false},
	} {
		if got := externalDataUnresolved(tc.err); got != tc.want {
			t.Errorf("%s: externalDataUnresolved(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
