package memory

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// uidPolicy copies the uid of its param (a ConfigMap of the state) into
// every ConfigMap written: with it in the state, fresh clusters (whose
// objects get uids of their own) must not share answers. (namespaceObject
// shows policies no uid.)
const uidPolicy = `
apiVersion: v1
kind: ConfigMap
metadata: {name: ids, namespace: default}
data: {k: v}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: param-uid}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
  matchConditions:
  - {name: not-the-param, expression: 'object.metadata.name != "ids"'}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{annotations: {"param-uid": params.metadata.uid}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: param-uid}
spec:
  policyName: param-uid
  paramRef: {name: ids, namespace: default, parameterNotFoundAction: Deny}
`

// TestSharedMemoMatchesFresh runs the writes of TestMemoisedWritesMatchFresh
// on one cluster, then on two fresh clusters built from the same objects:
// one sharing the first one's Cache (and so what its chains remembered),
// one admitting every write afresh. Every answer and the stored state of
// the two must be the same, and the one sharing the cache must answer
// from memory what the first cluster admitted. With a policy reading a
// namespace's uid (which every fresh cluster generates anew), answers must
// not be shared: each ConfigMap carries its own cluster's namespace uid.
func TestSharedMemoMatchesFresh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		// wantHits is the least number of writes the second cluster
		// answers from memory.
		wantHits int
		// uidRead: the state's policies read a generated field.
		uidRead bool
	}{
		{"dry-run blind", mirrorState, len(memoSteps) / 2, false},
		{"dry run read by a policy", mirrorState + "---" + dryRunPolicy, len(memoSteps) / 2, false},
		{"uid read by a policy", mirrorState + "---" + uidPolicy, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var base []*unstructured.Unstructured
			for _, doc := range strings.Split(tc.state, "\n---\n") {
				base = append(base, object(t, doc))
			}
			steps := slices.Clone(memoSteps)
			// A namespace of the base state: its uid is made by each
			// cluster when it starts.
			steps = append(steps, mirrorStep{"apply", configMap("locked", "app", 1), ""}, mirrorStep{"apply", configMap("locked", "app", 1), ""})
			cache := admission.NewCache(0)
			first := newCacheCluster(t, base, admission.Options{Cache: cache})
			for _, step := range steps {
				first.run(ctx, t, step)
			}
			shared := newCacheCluster(t, base, admission.Options{Cache: cache})
			fresh := newCacheCluster(t, base, admission.Options{NoMemo: true})
			for i, step := range steps {
				want := fresh.run(ctx, t, step)
				got := shared.run(ctx, t, step)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("step %d (%s %s): answer from the shared memo differs from a fresh one (-fresh +shared):\n%s", i, step.op, firstLine(step.yaml), diff)
				}
			}
			if diff := cmp.Diff(fresh.stateJSON(t), shared.stateJSON(t)); diff != "" {
				t.Errorf("stored state differs (-fresh +shared):\n%s", diff)
			}
			hits := shared.Chain().Remembered()
			if hits < tc.wantHits {
				t.Errorf("%d writes answered from memory, want at least %d", hits, tc.wantHits)
			}
			t.Logf("%d writes answered from memory", hits)
			if !tc.uidRead {
				return
			}
			// Each cluster's ConfigMaps carry its own param's uid.
			for _, c := range []*mirrorCluster{first, shared, fresh} {
				c.mu.Lock()
				defer c.mu.Unlock()
				param, ok := c.state.Get(schema.GroupKind{Kind: "ConfigMap"}, "default", "ids")
				if !ok {
					t.Fatal("the param is missing")
				}
				for _, ns := range []string{"team-a", "locked"} {
					cm, ok := c.state.Get(schema.GroupKind{Kind: "ConfigMap"}, ns, "app")
					if !ok {
						t.Fatalf("ConfigMap %s/app missing", ns)
					}
					if got := cm.GetAnnotations()["param-uid"]; got == "" || got != string(param.GetUID()) {
						t.Errorf("ConfigMap %s/app carries param uid %q, its cluster's param has %q", ns, got, param.GetUID())
					}
				}
			}
		})
	}
}

// newCacheCluster is a cluster of base's objects whose chains are built
// with opts.
func newCacheCluster(t *testing.T, base []*unstructured.Unstructured, opts admission.Options) *mirrorCluster {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, o := range base {
		objs = append(objs, o.DeepCopy())
	}
	state, err := admission.NewState(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), state, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	m := &mirrorCluster{Cluster: c, sortWarnings: true}
	c.Observe(func(_ admission.Request, r *admission.Result) { m.results = append(m.results, r) })
	return m
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
