package memory

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
)

// dryRunPolicy warns on writes that are not dry runs: with it in the
// state, a dry run's result must not answer the same write for real.
const dryRunPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: real-writes}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
  validations:
  - expression: "request.dryRun"
    message: a real write
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: real-writes}
spec:
  policyName: real-writes
  validationActions: [Warn]
`

const service = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: team-a}
spec:
  selector: {app: web}
  ports:
  - {port: 80, targetPort: 8080}
`

// memoSteps write the same objects again and again: a dry run then the
// same write for real (truce diff, Flux), the same apply round after round
// (self-heal) with the namespace, RBAC and other objects changing in
// between, deletes and creates again, Services (never remembered).
var memoSteps = []mirrorStep{
	{"apply", namespace("team-a", "team: red"), ""},
	{"dry-run-apply", configMap("team-a", "app", 1), `"team": "red"`},
	{"apply", configMap("team-a", "app", 1), `"team": "red"`},
	{"apply", configMap("team-a", "app", 1), ""},
	{"dry-run-apply", configMap("team-a", "app", 1), ""},
	{"apply", configMap("team-a", "other", 1), ""},
	{"apply", configMap("team-a", "app", 1), ""},
	{"apply", configMap("team-a", "app", 2), ""},
	{"apply", configMap("team-a", "app", 1), ""},
	{"apply", configMap("team-a", "app", 1), ""},
	// The namespace's labels decide the policies: a relabel between two
	// identical writes changes the answer.
	{"apply", namespace("team-a", "team: blue, env: prod, tier: gold"), ""},
	{"dry-run-apply", configMap("team-a", "app", 2), "prod ConfigMaps hold one key"},
	{"apply", configMap("team-a", "app", 1), `"team": "blue"`},
	{"apply", configMap("team-a", "app", 1), ""},
	{"admit-as-alice", configMap("team-a", "alice", 1), "forbidden"},
	{"admit-as-alice", configMap("team-a", "alice", 1), "forbidden"},
	{"apply", aliceRole, ""},
	{"apply", aliceBinding, ""},
	{"admit-as-alice", configMap("team-a", "alice", 1), `"allowed": true`},
	{"admit-as-alice", configMap("team-a", "alice", 1), `"allowed": true`},
	{"dry-run-apply", service, "clusterIP"},
	{"apply", service, "clusterIP"},
	{"apply", service, "clusterIP"},
	{"delete", configMap("team-a", "app", 1), ""},
	{"dry-run-apply", configMap("team-a", "app", 1), `"operation": "CREATE"`},
	{"create", configMap("team-a", "app", 1), `"operation": "CREATE"`},
	{"create", configMap("team-a", "app", 1), "already exists"},
	{"apply", namespace("team-a", "team: green"), ""},
	{"apply", configMap("team-a", "app", 1), `"team": "green"`},
	{"apply", configMap("team-a", "app", 1), ""},
}

// TestMemoisedWritesMatchFresh runs the same writes against a cluster
// whose chain admits every write afresh and one that answers writes it
// admitted before against the same state from memory, and compares every
// answer and the stored state; once with policies that cannot tell a dry
// run from a real write, once with one that can.
func TestMemoisedWritesMatchFresh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		// wantHits is the least number of writes answered from memory.
		wantHits int
	}{
		{"dry-run blind", mirrorState, 8},
		{"dry run read by a policy", mirrorState + "---" + dryRunPolicy, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var base []*unstructured.Unstructured
			for _, doc := range strings.Split(tc.state, "\n---\n") {
				base = append(base, object(t, doc))
			}
			fresh := newMemoCluster(t, base, true)
			memoised := newMemoCluster(t, base, false)
			for i, step := range memoSteps {
				want := fresh.run(ctx, t, step)
				got := memoised.run(ctx, t, step)
				if !strings.Contains(want, step.want) {
					t.Errorf("step %d (%s %s): the answer lacks %q:\n%s", i, step.op, firstLine(step.yaml), step.want, want)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("step %d (%s %s): remembered answer differs from a fresh one (-fresh +memoised):\n%s", i, step.op, firstLine(step.yaml), diff)
				}
			}
			if diff := cmp.Diff(fresh.stateJSON(t), memoised.stateJSON(t)); diff != "" {
				t.Errorf("stored state differs (-fresh +memoised):\n%s", diff)
			}
			if n := fresh.Chain().Remembered(); n != 0 {
				t.Errorf("the chain without memo answered %d writes from memory", n)
			}
			if n := memoised.Chain().Remembered(); n < tc.wantHits {
				t.Errorf("%d writes answered from memory, want at least %d", n, tc.wantHits)
			} else {
				t.Logf("%d writes answered from memory", n)
			}
		})
	}
}

func newMemoCluster(t *testing.T, base []*unstructured.Unstructured, noMemo bool) *mirrorCluster {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, o := range base {
		objs = append(objs, o.DeepCopy())
	}
	state, err := admission.NewState(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), state, admission.Options{NoMemo: noMemo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	m := &mirrorCluster{Cluster: c, sortWarnings: true}
	c.Observe(func(_ admission.Request, r *admission.Result) { m.results = append(m.results, r) })
	return m
}

// dryRunApply is a server-side apply with dryRun=All whose admission
// result the answer shows.
func (m *mirrorCluster) dryRunApply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	stored, err := m.Apply(ctx, obj.DeepCopy(), cluster.ApplyOptions{FieldManager: "test", Force: true, DryRun: true})
	res, aerr := m.Admit(ctx, admission.Request{Object: obj, FieldManager: "test", Apply: true, Force: true})
	if aerr != nil {
		return nil, aerr
	}
	m.results = append(m.results, res)
	return stored, err
}
