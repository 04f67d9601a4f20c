package kyverno_test

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/engine/kyverno"
)

// Refusals asks the webhook Kyverno generated for each kind: policies,
// PolicyExceptions and cleanup policies (the cleanup controller's webhook)
// are judged, objects not Kyverno's are not.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name, obj string
		refused   string // a text of the refusal; "" for accepted
	}{
		{name: "valid ClusterPolicy", obj: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ok}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {labels: {app: "?*"}}}}`},
		{name: "two validations", refused: "only one of pattern, anyPattern, deny, foreach, cel can be specified", obj: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: two}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {labels: {app: "?*"}}}, deny: {}}`},
		{name: "ValidatingPolicy that does not compile", refused: "undeclared reference", obj: `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: cel}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations:
  - expression: "nosuch.field == 1"`},
		{name: "PolicyException without images", refused: "exclude.images must be specified", obj: `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: apps}
spec:
  exceptions: [{policyName: psa, ruleNames: [restricted]}]
  match: {all: [{resources: {kinds: [Pod]}}]}
  podSecurity: [{controlName: Capabilities}]`},
		// Cleanup policies meet the cleanup controller's webhook, on a
		// Service of its own.
		{name: "valid cleanup policy", obj: `
apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: clean}
spec:
  schedule: "*/5 * * * *"
  match: {any: [{resources: {kinds: [Pod]}}]}`},
		{name: "cleanup policy with a schedule that is not cron", refused: "schedule spec in the cleanupPolicy is not in proper cron format", obj: `
apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: clean}
spec:
  schedule: "every five minutes"
  match: {any: [{resources: {kinds: [Pod]}}]}`},
		{name: "not Kyverno's", obj: configMap("c", "a: b")},
	}
	eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
	t.Cleanup(eng.Close)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := eng.Refusals(testContext(t), objs(t, namespaces), objs(t, tt.obj))
			if err != nil {
				t.Fatal(err)
			}
			msg, refused := got[0]
			if refused != (tt.refused != "") {
				t.Fatalf("refused = %v (%s), want %v", refused, msg, tt.refused != "")
			}
			if refused && !strings.Contains(msg, tt.refused) {
				t.Errorf("refusal %q, want it to contain %q", msg, tt.refused)
			}
		})
	}
}
