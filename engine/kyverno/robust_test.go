package kyverno_test

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// widgetPolicy validates a kind the cluster does not serve (a CRD that is
// not installed): Kyverno's policy cache cannot place it.
const widgetPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: widgets-need-owner}
spec:
  validationFailureAction: Enforce
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [example.com/v1/Widget]}}]}
    validate:
      message: widgets need an owner
      pattern: {metadata: {labels: {owner: "?*"}}}
`

// TestPolicyForMissingKind checks that a policy for a kind the cluster
// does not serve leaves the other policies working, as in a running
// Kyverno (its policy-cache controller reconciles each policy; a failed
// one is placed for the kinds that were found).
func TestPolicyForMissingKind(t *testing.T) {
	chain := newChain(t, namespaces, widgetPolicy, requireApp)
	for _, tt := range []struct {
		name    string
		object  string
		allowed bool
		message string
	}{
		{name: "the other policy denies", object: configMap("c", "k: v"), message: "the label app is required"},
		{name: "the other policy allows", object: configMap("c", "app: a"), allowed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, tt.object)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tt.allowed || !strings.Contains(res.Message, tt.message) {
				t.Fatalf("allowed = %v (%q), want %v (%q)", res.Allowed, res.Message, tt.allowed, tt.message)
			}
		})
	}
}

// TestImageDataOffline checks that Kyverno's CEL image library does not
// reach a registry: the rule fails, naming the image and saying why.
func TestImageDataOffline(t *testing.T) {
	chain := newChain(t, celNamespaces, `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: image-has-digest}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  variables:
  - name: data
    expression: image.GetMetadata(object.spec.containers[0].image)
  validations:
  - expression: "has(variables.data.manifest)"
    message: no manifest
`)
	res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: apps}
spec: {containers: [{name: c, image: ghcr.io/example/app:1.0}]}
`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ghcr.io", "truce runs Kyverno offline"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q, want it to contain %q", res.Message, want)
		}
	}
	if strings.Contains(res.Message, "lookup") {
		t.Errorf("message %q: a name was looked up", res.Message)
	}
	if !strings.Contains(strings.Join(res.Unpredictable, "\n"), "image-has-digest") {
		t.Errorf("unpredictable %q, want the policy named", res.Unpredictable)
	}
}
