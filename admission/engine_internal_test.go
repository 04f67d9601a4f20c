package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEngineUnpredictable(t *testing.T) {
	tests := []struct {
		name     string
		in, left map[string]string
		want     []string
	}{
		{"none", map[string]string{"a.example.com/x": "y"}, map[string]string{"a.example.com/x": "y"}, nil},
		{"taken out, sorted",
			map[string]string{"b.example.com/" + UnpredictableAnnotation: "two", "a.example.com/" + UnpredictableAnnotation: "one", "a.example.com/x": "y"},
			map[string]string{"a.example.com/x": "y"},
			[]string{"webhook a.example.com: one", "webhook b.example.com: two"}},
		{"a key of another webhook is kept", map[string]string{"a.example.com/" + UnpredictableAnnotation + "-not": "z"}, map[string]string{"a.example.com/" + UnpredictableAnnotation + "-not": "z"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := engineUnpredictable(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unpredictable (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.left, tc.in); diff != "" {
				t.Errorf("annotations left (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailurePolicyDecided(t *testing.T) {
	for entry, want := range map[string]bool{
		"mutating webhook sidecar.example.com (istio-system/istiod)":                                       true,
		"validating webhook check.example.com (10.0.0.1:443)":                                              true,
		"webhook mutation.gatekeeper.sh: Gatekeeper mutators take a value from external data (Provider p)": false,
		"webhook validate.kyverno.svc-fail: image verification":                                            false,
	} {
		if got := FailurePolicyDecided(entry); got != want {
			t.Errorf("FailurePolicyDecided(%q) = %v, want %v", entry, got, want)
		}
	}
}
