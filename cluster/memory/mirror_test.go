package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
)

// mirrorState is what both clusters of TestMirroredWritesMatchRebuilds
// start from: namespace-selected policies (a MutatingAdmissionPolicy
// reading namespaceObject, a denying and a warning
// ValidatingAdmissionPolicy), a terminating namespace and one that enforces
// the restricted Pod Security level.
const mirrorState = `
apiVersion: v1
kind: Namespace
metadata:
  name: leaving
  labels: {kubernetes.io/metadata.name: leaving}
status: {phase: Terminating}
---
apiVersion: v1
kind: Namespace
metadata:
  name: locked
  labels: {kubernetes.io/metadata.name: locked, pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team-label}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": namespaceObject.metadata.labels["team"]}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team-label}
spec:
  policyName: team-label
  matchResources:
    namespaceSelector: {matchExpressions: [{key: team, operator: Exists}]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: prod-small}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
  validations:
  - expression: "!has(object.data) || size(object.data) <= 1"
    message: prod ConfigMaps hold one key
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: prod-small}
spec:
  policyName: prod-small
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: gold-tier}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
  validations:
  - expression: "namespaceObject.metadata.?labels[?'tier'].orValue('') == 'gold'"
    messageExpression: "'namespace ' + namespaceObject.metadata.name + ' is not gold'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: gold-tier}
spec:
  policyName: gold-tier
  validationActions: [Warn]
`

func namespace(name string, labels string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {%s}\n", name, labels)
}

func configMap(ns, name string, keys int) string {
	data := []string{}
	for i := range keys {
		data = append(data, fmt.Sprintf("k%d: v", i))
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {%s}\n", name, ns, strings.Join(data, ", "))
}

// pod returns a Pod; a capable one adds SYS_ADMIN, which the baseline
// Pod Security level forbids.
func pod(ns, name string, capable bool) string {
	add := "[]"
	if capable {
		add = "[SYS_ADMIN]"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  containers:
  - name: app
    image: nginx:1.27
    securityContext: {capabilities: {add: %s}}
`, name, ns, add)
}

const (
	aliceRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: configmaps, namespace: team-a}
rules:
- {apiGroups: [""], resources: ["configmaps"], verbs: ["create", "update"]}
`
	aliceBinding = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmaps}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`
)

// mirrorStep is one request of the sequence: a write (create, update by
// apply, delete) or a dry-run admission as a user.
type mirrorStep struct {
	op   string // apply, create, delete, admit-as-alice
	yaml string
	// want is part of the answer, so the sequence is known to exercise
	// what it is meant to.
	want string
}

var mirrorSteps = []mirrorStep{
	// A namespace that does not exist yet, then does.
	{"create", configMap("team-a", "early", 1), `namespaces \"team-a\" not found`},
	{"apply", namespace("team-a", "team: red"), ""},
	{"create", configMap("team-a", "early", 1), ""},
	// Relabelled between policy-matched writes: selectors and
	// namespaceObject follow the labels.
	{"apply", namespace("team-a", "team: blue, env: prod, tier: gold"), ""},
	{"create", configMap("team-a", "big", 2), "prod ConfigMaps hold one key"},
	{"create", configMap("team-a", "small", 1), `"team": "blue"`},
	{"apply", namespace("team-a", "team: green"), ""},
	{"create", configMap("team-a", "big", 2), "is not gold"},
	{"apply", configMap("team-a", "small", 3), ""},
	// RBAC written between a user's requests.
	{"admit-as-alice", configMap("team-a", "alice", 1), "forbidden"},
	{"apply", aliceRole, ""},
	{"admit-as-alice", configMap("team-a", "alice", 1), "forbidden"},
	{"apply", aliceBinding, ""},
	{"admit-as-alice", configMap("team-a", "alice", 1), `"allowed": true`},
	// Pod Security: a capable Pod (it needs the namespace's default
	// ServiceAccount), then the namespace enforces restricted (warnings
	// name the existing Pod), then a new one is denied.
	{"apply", namespace("psa", "pod-security.kubernetes.io/warn: baseline"), ""},
	{"create", pod("psa", "capable", true), "would violate PodSecurity"},
	{"create", pod("psa", "plain", false), ""},
	{"apply", namespace("psa", "pod-security.kubernetes.io/enforce: baseline"), "existing pods in namespace"},
	{"create", pod("psa", "capable-2", true), `violates PodSecurity \"baseline:latest\"`},
	{"delete", pod("psa", "capable", true), ""},
	{"apply", namespace("psa", "pod-security.kubernetes.io/enforce: restricted"), "existing pods in namespace"},
	{"create", pod("locked", "plain", false), `violates PodSecurity \"restricted:latest\"`},
	// NamespaceLifecycle: nothing new in a terminating namespace, even
	// relabelled.
	{"create", configMap("leaving", "late", 1), "being terminated"},
	{"apply", namespace("leaving", "team: red"), ""},
	{"create", configMap("leaving", "late", 1), "being terminated"},
	// Deleted and written again: a create, not an update.
	{"delete", configMap("team-a", "small", 1), ""},
	{"create", configMap("team-a", "small", 1), `"operation": "CREATE"`},
	// A deleted namespace takes its objects along.
	{"delete", namespace("team-a", ""), ""},
	{"create", configMap("team-a", "after", 1), "not found"},
	{"apply", namespace("team-a", "team: red"), ""},
	{"create", configMap("team-a", "after", 1), ""},
}

// TestMirroredWritesMatchRebuilds runs the same writes against a cluster
// that builds its admission chain again after every write and one that
// mirrors writes into the chain's informers, and compares every answer:
// the stored object, warnings, audit annotations, attributions, denials
// and, at the end, the whole stored state.
func TestMirroredWritesMatchRebuilds(t *testing.T) {
	ctx := context.Background()
	var base []*unstructured.Unstructured
	for _, doc := range strings.Split(mirrorState, "\n---\n") {
		base = append(base, object(t, doc))
	}
	reference := newMirrorCluster(t, base, true)
	mirrored := newMirrorCluster(t, base, false)
	for i, step := range mirrorSteps {
		want := reference.run(ctx, t, step)
		got := mirrored.run(ctx, t, step)
		if !strings.Contains(want, step.want) {
			t.Errorf("step %d (%s %s): the answer lacks %q:\n%s", i, step.op, firstLine(step.yaml), step.want, want)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("step %d (%s %s): mirrored answer differs from a rebuilt chain's (-rebuilt +mirrored):\n%s", i, step.op, firstLine(step.yaml), diff)
		}
	}
	if diff := cmp.Diff(reference.stateJSON(t), mirrored.stateJSON(t)); diff != "" {
		t.Errorf("stored state differs (-rebuilt +mirrored):\n%s", diff)
	}
	if reference.rebuilds <= mirrored.rebuilds {
		t.Errorf("the mirrored cluster rebuilt %d times, the reference %d: nothing was mirrored", mirrored.rebuilds, reference.rebuilds)
	}
	t.Logf("chains built: %d rebuilding after every write, %d mirrored", reference.rebuilds, mirrored.rebuilds)
}

type mirrorCluster struct {
	*Cluster
	results  []*admission.Result
	rebuilds int
	// sortWarnings compares warnings as a set: the policy plugins
	// evaluate policies in their informer's order, which is a map's.
	sortWarnings bool
}

func newMirrorCluster(t *testing.T, base []*unstructured.Unstructured, rebuildEveryWrite bool) *mirrorCluster {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, o := range base {
		objs = append(objs, o.DeepCopy())
	}
	c := newCluster(t, objs...)
	c.rebuildEveryWrite = rebuildEveryWrite
	m := &mirrorCluster{Cluster: c}
	c.Observe(func(_ admission.Request, r *admission.Result) { m.results = append(m.results, r) })
	return m
}

// run makes the request and returns its answer as comparable text.
func (m *mirrorCluster) run(ctx context.Context, t *testing.T, step mirrorStep) string {
	t.Helper()
	obj := object(t, step.yaml)
	before := m.chainCount()
	m.results = nil
	var stored *unstructured.Unstructured
	var err error
	switch step.op {
	case "apply":
		stored, err = m.Apply(ctx, obj, cluster.ApplyOptions{FieldManager: "test", Force: true})
	case "create":
		stored, err = m.Create(ctx, obj, cluster.WriteOptions{FieldManager: "test"})
	case "delete":
		err = m.Delete(ctx, cluster.Ref{GroupVersionKind: obj.GroupVersionKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}, cluster.DeleteOptions{})
	case "dry-run-apply":
		stored, err = m.dryRunApply(ctx, obj)
	case "admit-as-alice":
		var res *admission.Result
		res, err = m.Admit(ctx, admission.Request{Object: obj, User: "alice", FieldManager: "test"})
		if res != nil {
			m.results = append(m.results, res)
		}
	default:
		t.Fatalf("unknown step %q", step.op)
	}
	m.rebuilds += m.chainCount() - before
	if m.sortWarnings {
		for _, r := range m.results {
			r.Warnings = slices.Clone(r.Warnings)
			slices.Sort(r.Warnings)
		}
	}
	answer := map[string]any{"results": m.results}
	if stored != nil {
		answer["stored"] = stored.Object
	}
	if err != nil {
		answer["error"] = err.Error()
	}
	return normalise(t, answer)
}

func (m *mirrorCluster) chainCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.builds
}

// stateJSON is the whole stored state, in order.
func (m *mirrorCluster) stateJSON(t *testing.T) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var objs []map[string]any
	for _, o := range m.state.Objects() {
		objs = append(objs, o.Object)
	}
	return normalise(t, objs)
}

// uids and timestamps are made fresh by every create.
var (
	uidPattern  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	// The ServiceAccount plugin names a Pod's token volume with a random
	// suffix.
	tokenPattern = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)
)

func normalise(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	s := uidPattern.ReplaceAllString(string(b), "UID")
	s = tokenPattern.ReplaceAllString(s, "kube-api-access-XXXXX")
	return timePattern.ReplaceAllString(s, "TIME")
}

func firstLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[:min(len(lines), 3)], " ")
}
