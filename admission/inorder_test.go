package admission_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
)

// inOrderState has policies the writes of TestAdmitInOrderMatchesSequential
// run into: a label from the namespace, a replica limit only in prod
// namespaces, a warning.
const inOrderState = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team-label}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: ["", apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps, deployments]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": namespaceObject.metadata.?labels[?"team"].orValue("none")}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team-label}
spec: {policyName: team-label}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: prod-replicas}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 3"
    message: at most 3 replicas in prod
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: prod-replicas}
spec:
  policyName: prod-replicas
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
`

func inOrderWrites(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var docs []string
	ns := func(name, labels string) {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {%s}}\n", name, labels))
	}
	cm := func(ns, name, value string) {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {k: %s}\n", name, ns, value))
	}
	deploy := func(ns, name string, replicas int) {
		docs = append(docs, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s}
spec:
  replicas: %d
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec: {containers: [{name: app, image: "nginx:1.27"}]}
`, name, ns, replicas, name, name))
	}
	pod := func(ns, name string) {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec: {containers: [{name: app, image: \"nginx:1.27\"}]}\n", name, ns))
	}
	// Objects in a namespace written later: denied, then (after it) not.
	cm("shop", "early", "1")
	ns("shop", "team: red, env: prod")
	for i := range 20 {
		cm("shop", fmt.Sprintf("c%d", i), "1")
		deploy("shop", fmt.Sprintf("d%d", i), 1+i%5) // some over the limit
		cm("default", fmt.Sprintf("c%d", i), "1")
	}
	// The same object twice in a row: an update of the first.
	cm("shop", "c3", "2")
	cm("shop", "c3", "3")
	cm("shop", "new", "1")
	cm("shop", "new", "2")
	pod("shop", "p1")
	pod("shop", "p2")
	// A relabelled namespace between writes.
	ns("shop", "team: blue")
	for i := range 10 {
		deploy("shop", fmt.Sprintf("d%d", i), 5)
		cm("shop", fmt.Sprintf("c%d", i), "again")
	}
	docs = append(docs, `apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80}]}
`, `apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec: {selector: {app: api}, ports: [{port: 80}]}
`)
	// A policy written between writes reconfigures admission.
	docs = append(docs, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-big-configs}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  validations:
  - expression: "object.data.k != 'big'"
`, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-big-configs}
spec: {policyName: no-big-configs, validationActions: [Deny]}
`)
	for i := range 10 {
		cm("default", fmt.Sprintf("b%d", i), []string{"big", "small"}[i%2])
	}
	cm("nowhere", "lost", "1")
	return parseYAML(t, docs...)
}

// TestAdmitInOrderMatchesSequential admits the same writes one after the
// other (each committed, the chain built again after configuration, as
// truce admit did) and through AdmitInOrder on several goroutines, and
// compares every result and the stored state.
func TestAdmitInOrderMatchesSequential(t *testing.T) {
	ctx := context.Background()
	writes := inOrderWrites(t)
	request := func(i int, op admission.Operation) (admission.Request, error) {
		return admission.Request{Source: fmt.Sprintf("write %d", i), Object: writes[i].DeepCopy(), FieldManager: admission.KubectlFieldManager(op)}, nil
	}
	inOrder := make([]admission.Write, len(writes))
	for i, w := range writes {
		inOrder[i] = admission.Write{Source: fmt.Sprintf("write %d", i), Object: w, Admit: func(ctx context.Context, chain *admission.Chain) (*admission.Result, error) {
			op, err := chain.Operation(w)
			if err != nil {
				return nil, err
			}
			req, _ := request(i, op)
			return chain.Admit(ctx, req)
		}}
	}
	newState := func() *admission.State {
		state, err := admission.NewState(parseYAML(t, inOrderState)...)
		if err != nil {
			t.Fatal(err)
		}
		return state
	}

	// One after the other, nothing remembered.
	refState := newState()
	opts := admission.Options{NoMemo: true}
	chain, err := admission.NewChain(ctx, refState, opts)
	if err != nil {
		t.Fatal(err)
	}
	var want []*admission.Result
	for i := range writes {
		op, err := chain.Operation(writes[i])
		if err != nil {
			t.Fatal(err)
		}
		req, _ := request(i, op)
		res, err := chain.Admit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
		reconfigure, err := chain.Commit(res)
		if err != nil {
			t.Fatal(err)
		}
		if reconfigure {
			chain.Close()
			if chain, err = admission.NewChain(ctx, refState, opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	chain.Close()

	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			state := newState()
			chain, err := admission.NewChain(ctx, state, admission.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, last, err := admission.AdmitInOrder(ctx, chain, inOrder, workers)
			last.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d results, want %d", len(got), len(want))
			}
			allowed, denied := 0, 0
			for i := range want {
				if want[i].Allowed {
					allowed++
				} else {
					denied++
				}
				if diff := cmp.Diff(inOrderComparable(t, want[i]), inOrderComparable(t, got[i])); diff != "" {
					t.Errorf("write %d (%s %s/%s): result differs (-sequential +in order):\n%s", i, writes[i].GetKind(), writes[i].GetNamespace(), writes[i].GetName(), diff)
				}
			}
			if allowed == 0 || denied < 3 {
				t.Errorf("%d allowed, %d denied: the writes exercise too little", allowed, denied)
			}
			var wantState, gotState []string
			for _, o := range refState.Objects() {
				wantState = append(wantState, inOrderComparable(t, &admission.Result{Object: o.Object}))
			}
			for _, o := range state.Objects() {
				gotState = append(gotState, inOrderComparable(t, &admission.Result{Object: o.Object}))
			}
			if diff := cmp.Diff(wantState, gotState); diff != "" {
				t.Errorf("stored state differs (-sequential +in order):\n%s", diff)
			}
		})
	}
}

var tokenVolume = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)

// inOrderComparable is comparable's text of a result, the random suffix of
// a Pod's token volume replaced.
func inOrderComparable(t *testing.T, r *admission.Result) string {
	return tokenVolume.ReplaceAllString(comparable(t, r), "kube-api-access-XXXXX")
}
