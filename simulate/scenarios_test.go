package simulate

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The common mutation/GitOps scenarios (which mutations show as drift, the
// tracking-label problem, Kyverno's mutate existing, a webhook truce cannot
// call) come out of the simulation, not special cases.

const labelPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: cost-center}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"cost-center": "shared"}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: cost-center}
spec: {policyName: cost-center}
`

// A CRD whose list is compared whole, and a policy that adds an element.
const gatewayCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gateways.example.com}
spec:
  group: example.com
  names: {kind: Gateway, plural: gateways, singular: gateway, listKind: GatewayList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              listeners:
                type: array
                x-kubernetes-list-type: atomic
                items: {type: string}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: add-metrics-listener}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: ["example.com"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["gateways"]}
  matchConditions:
  - {name: missing, expression: '!object.spec.listeners.exists(l, l == "metrics")'}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/listeners/-", value: "metrics"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: add-metrics-listener}
spec: {policyName: add-metrics-listener}
`

const gateway = `apiVersion: example.com/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  listeners: [http, https]
`

func TestWhichMutationsShow(t *testing.T) {
	argo := func(d []Desired) Tool { return &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d} }
	cases := []struct {
		name    string
		cluster string
		git     string
		want    Verdict
		// admission must have changed the tool's first write (the rule is
		// not that nothing was mutated).
		mutatedBy string
	}{
		{name: "a mutation of a field Git sets shows", cluster: shop + "---\n" + mirrorPolicy, git: web, want: Loop, mutatedBy: "MutatingAdmissionPolicy/mirror"},
		{name: "an added label does not show under the three-way diff", cluster: shop + "---\n" + labelPolicy, git: web, want: Synced, mutatedBy: "MutatingAdmissionPolicy/cost-center"},
		{name: "a list compared whole shows an added element", cluster: shop + "---\n" + gatewayCRD, git: gateway, want: Loop, mutatedBy: "MutatingAdmissionPolicy/add-metrics-listener"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.cluster)
			d := desiredOf(t, tc.git)
			res, err := Run(context.Background(), c, argo(d), nil, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Objects[0]
			if o.Verdict != tc.want {
				t.Fatalf("verdict %s (%s), want %s", o.Verdict, o.Reason, tc.want)
			}
			first := res.Writes[0]
			if len(first.Admission) == 0 || !strings.HasPrefix(first.Admission[0].By, tc.mutatedBy) {
				t.Errorf("first write's admission steps %+v, want %s", first.Admission, tc.mutatedBy)
			}
		})
	}
}

func generator(sync bool, ns string) *Generator {
	return &Generator{Manager: "kyverno", Clone: Selector{Kind: "Secret", Namespace: "shop", Name: "creds"},
		Namespaces: []string{ns}, Synchronize: sync, After: time.Second}
}

const namespaces = shop + `---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
`

const creds = `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: shop}
stringData: {token: abc}
`

// The tracking-label problem: a copy that inherits Argo CD's label is
// pruned (and fought over with synchronize); annotation tracking leaves it.
func TestTrackingLabel(t *testing.T) {
	cases := []struct {
		name     string
		tracking string
		sync     bool
		want     Verdict // of the copy; "" when it is left alone
	}{
		{"label tracking prunes the copy", "label", false, Pruned},
		{"label tracking and synchronize fight", "label", true, Loop},
		{"annotation tracking leaves the copy", "annotation", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, namespaces)
			d := desiredOf(t, creds)
			tool := &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Prune: true, TrackingMethod: tc.tracking, Desired: d, Kinds: generator(tc.sync, "team-a").Creates()}
			res, err := Run(context.Background(), c, tool, []Writer{generator(tc.sync, "team-a")}, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got Verdict
			for _, o := range res.Objects {
				if o.Ref.Namespace == "team-a" {
					got = o.Verdict
				} else if o.Verdict != Synced {
					t.Errorf("%s: %s (%s)", o.Ref, o.Verdict, o.Reason)
				}
			}
			if got != tc.want {
				t.Fatalf("copy: %q, want %q", got, tc.want)
			}
			if tc.want == "" {
				// The copy exists and carries its original's tracking id.
				live, err := c.Get(context.Background(), refOf(t, "v1", "Secret", "team-a", "creds"))
				if err != nil {
					t.Fatalf("the copy is gone: %v", err)
				}
				if id := live.GetAnnotations()["argocd.argoproj.io/tracking-id"]; !strings.Contains(id, ":shop/creds") {
					t.Errorf("tracking id %q", id)
				}
			}
		})
	}
}

func TestKyvernoMutateExistingIsAsynchronous(t *testing.T) {
	c := newCluster(t, shop)
	d := desiredOf(t, web)
	w := &FieldWriter{Type: TypeKyvernoMutateExisting, Manager: "kyverno", Target: Selector{Group: "apps", Kind: "Deployment", Namespace: "shop"},
		Set: map[string]any{"/spec/replicas": int64(4)}, After: 10 * time.Second, Every: 10 * time.Minute}
	res, err := Run(context.Background(), c, &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d}, []Writer{w}, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Objects[0]
	if o.Verdict != Loop || o.Loop.Other != "kyverno" || o.Loop.Period != 10*time.Minute {
		t.Fatalf("%s %+v (%s)", o.Verdict, o.Loop, o.Reason)
	}
	// The drift appears after a clean sync, when the trigger fires.
	if first := res.Writes[1]; first.Writer != "kyverno" || first.At != 10*time.Minute+10*time.Second {
		t.Errorf("second write %+v, want kyverno at 10m10s", first)
	}
	if !slices.Contains(o.Loop.Fields, "/spec/replicas") {
		t.Errorf("fields %v", o.Loop.Fields)
	}
}

// A webhook that cannot be called offline makes the outcome unknown: the
// verdict says so instead of guessing.
func TestUnpredictableWebhook(t *testing.T) {
	const hook = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: injector}
webhooks:
- name: inject.example.com
  clientConfig: {service: {namespace: sys, name: injector, path: /mutate}}
  rules:
  - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
`
	c := newCluster(t, shop+"---\n"+hook)
	d := desiredOf(t, web)
	res, err := Run(context.Background(), c, &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d}, nil, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Objects[0]
	if o.Verdict != Unpredictable || len(o.Unpredictable) != 1 || !strings.Contains(o.Unpredictable[0], "inject.example.com") {
		t.Fatalf("%s %v (%s)", o.Verdict, o.Unpredictable, o.Reason)
	}
}
