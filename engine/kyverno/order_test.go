package kyverno_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
)

// labelPolicy is a ClusterPolicy setting label key=value on ConfigMaps.
func labelPolicy(name, key, value string) string {
	return `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ` + name + `}
spec:
  rules:
  - name: label
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {` + key + `: ` + value + `}}}
`
}

// TestMutationOrder checks that two ClusterPolicies whose mutations depend
// on the order Kyverno applies them (its policy cache is a set) are named
// Unpredictable, with a stable answer, and that commuting ones are not.
func TestMutationOrder(t *testing.T) {
	for _, tt := range []struct {
		name          string
		policies      []string
		unpredictable bool
		labels        map[string]string
	}{{
		name:          "the same label set to two values",
		policies:      []string{labelPolicy("team-a", "team", "a"), labelPolicy("team-b", "team", "b")},
		unpredictable: true,
		// Policies ascending: team-b's value is applied last.
		labels: map[string]string{"team": "b"},
	}, {
		name:     "two labels",
		policies: []string{labelPolicy("team", "team", "a"), labelPolicy("tier", "tier", "web")},
		labels:   map[string]string{"team": "a", "tier": "web"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			chain := newChain(t, append([]string{namespaces}, tt.policies...)...)
			for range 3 {
				res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, configMap("c", "k: v"))})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					t.Fatalf("denied: %s", res.Message)
				}
				named := strings.Contains(strings.Join(res.Unpredictable, "\n"), "in no fixed order")
				if named != tt.unpredictable {
					t.Errorf("unpredictable %q, want order named: %v", res.Unpredictable, tt.unpredictable)
				}
				labels, _, _ := unstructured.NestedStringMap(res.Object, "metadata", "labels")
				for k, v := range tt.labels {
					if labels[k] != v {
						t.Errorf("label %s = %q, want %q", k, labels[k], v)
					}
				}
			}
		})
	}
}
