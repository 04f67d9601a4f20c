package admission_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// TestReviewObjectsAnswerAlike: a reviewing chain built on
// ReviewObjects answers every probe as one built on all the objects, for
// policies reading params, namespace labels and the authorizer.
func TestReviewObjectsAnswerAlike(t *testing.T) {
	all := parseYAML(t, `
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {tier: gold}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: params, namespace: team}
data: {owner: alice}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: owner}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"owner": string(params.data.owner),
          "tier": namespaceObject.metadata.labels.tier,
          "admin": string(authorizer.serviceAccount("team", "default").group("apps").resource("deployments").namespace("team").check("delete").allowed())}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: owner}
spec:
  policyName: owner
  paramRef: {name: params, namespace: team, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {tier: gold}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 3"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas}
spec:
  policyName: replicas
  validationActions: [Deny]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deleter, namespace: team}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: edit, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deleter}
subjects:
- {kind: ServiceAccount, name: default, namespace: team}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team}
spec:
  replicas: 5
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: app, image: nginx}]}
`)
	kept := admission.ReviewObjects(all)
	if len(kept) >= len(all) {
		t.Fatalf("ReviewObjects kept all %d objects", len(all))
	}
	for _, o := range kept {
		if o.GetKind() == "Deployment" {
			t.Errorf("ReviewObjects kept Deployment %s", o.GetName())
		}
	}
	full, fewer := reviewChain(t, all), reviewChain(t, kept)
	var samples []manifest.Object
	for _, o := range all {
		samples = append(samples, manifest.Object{Object: o})
	}
	probes := admission.Probes(full.State(), samples)
	if len(probes) == 0 {
		t.Fatal("no probes")
	}
	ctx := context.Background()
	mutated := 0
	for _, p := range probes {
		for _, step := range []struct {
			name string
			run  func(*admission.Chain) (*admission.ReviewResult, error)
		}{
			{"mutate", func(c *admission.Chain) (*admission.ReviewResult, error) { return c.Mutate(ctx, p.Review(p.Body)) }},
			{"validate", func(c *admission.Chain) (*admission.ReviewResult, error) { return c.Validate(ctx, p.Review(p.Body)) }},
		} {
			want, werr := step.run(full)
			got, gerr := step.run(fewer)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s %s: error %v with all objects, %v with ReviewObjects", step.name, p.Source, werr, gerr)
			}
			if !reflect.DeepEqual(reviewAnswer(t, want), reviewAnswer(t, got)) {
				t.Errorf("%s %s:\n all objects:   %v\n ReviewObjects: %v", step.name, p.Source, reviewAnswer(t, want), reviewAnswer(t, got))
			}
			if step.name == "mutate" && want != nil && len(want.Changes) > 0 {
				mutated++
			}
		}
	}
	if mutated == 0 {
		t.Fatal("no probe was mutated: the policies under test never ran")
	}
}

func reviewChain(t *testing.T, objs []*unstructured.Unstructured) *admission.Chain {
	t.Helper()
	state, err := admission.NewState(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := admission.NewChain(context.Background(), state, admission.WebhookOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// reviewAnswer is what a review answered, comparable across chains.
func reviewAnswer(t *testing.T, r *admission.ReviewResult) map[string]any {
	t.Helper()
	if r == nil {
		return nil
	}
	out := map[string]any{"allowed": r.Allowed, "warnings": r.Warnings, "changes": r.Changes}
	if r.Status != nil {
		out["status"] = r.Status.Message
	}
	if r.Object != nil {
		var o any
		if err := json.Unmarshal(r.Object, &o); err != nil {
			t.Fatal(err)
		}
		out["object"] = o
	}
	return out
}
