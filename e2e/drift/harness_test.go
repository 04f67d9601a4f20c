//go:build e2e

package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/e2e/apiserver"
)

// op is the kind of write a step makes.
type op string

const (
	// opApply is a server-side apply (PATCH application/apply-patch+yaml).
	opApply op = "apply"
	// opUpdate is a controller's get-modify-update: read the stored
	// object, merge the step's object into it (RFC 7386 JSON merge patch:
	// null deletes) and PUT the result with the resourceVersion read.
	opUpdate op = "update"
	// opCreate is a POST.
	opCreate op = "create"
	// opClientApply is kubectl's client-side apply of a new object, as Argo
	// CD's default sync runs it: a POST of the object carrying the
	// last-applied-configuration annotation (the object itself), which
	// Argo CD's legacy diff reads as the "original" of its three-way diff.
	// Only creation is supported.
	opClientApply op = "client-apply"
)

// step is one write of a case's history.
type step struct {
	op      op
	manager string
	force   bool
	// object is YAML. For opUpdate it names the object (apiVersion, kind,
	// metadata.name) and carries only the fields to change. Namespaced
	// objects go to the case's namespace.
	object string
	// wantConflict: the write must fail with 409 Conflict on both
	// clusters (a non-forced apply of a field another manager owns).
	wantConflict bool
	// repeatNextSecond makes runHistory repeat the apply only once the
	// clock has passed the second of the first one. managedFields times
	// have a resolution of one second, so only then does a repeat that
	// the server turns into a no-op by reverting timestamp-only changes
	// differ from one that touches nothing at all.
	repeatNextSecond bool
}

// testCase is a history of writes followed by what Git says.
type testCase struct {
	name string
	// prereqs are YAML documents of cluster-scoped objects (CRDs, admission
	// policies) or built-ins that exist before the history, besides the
	// case's namespace. They are created on the server (and waited for:
	// CRDs served, policies in effect) and are the memory cluster's
	// initial state.
	prereqs string
	steps   []step
	// wantStored, if set, is YAML that the object the server stores after
	// the history must contain (a subset, checked against the server), to
	// keep the case honest: e.g. that a policy did mutate it.
	wantStored string
	// probe shows that the case's admission configuration is in effect.
	// Required when prereqs hold admission policies, bindings or webhook
	// configurations (see waitForAdmission).
	probe admissionProbe
	// desired is the object in Git.
	desired string
	flux    fluxCase
	argo    argoCase
	// skip, if set, skips the case: "truce bug: ..." for a case that shows
	// a known difference between truce and the server. Set
	// TRUCE_E2E_DRIFT_SKIPPED=1 to run such cases anyway.
	skip string
}

// skipIfKnown skips a case marked with a known difference.
func skipIfKnown(t *testing.T, tc testCase) {
	t.Helper()
	if tc.skip != "" && os.Getenv("TRUCE_E2E_DRIFT_SKIPPED") != "1" {
		t.Skip(tc.skip)
	}
}

// env is one case's pair of clusters: the real server (through
// cluster/live) and a fresh memory cluster holding the same prerequisites.
type env struct {
	srv  *apiserver.Server
	ns   string
	live *live.Cluster
	mem  *memory.Cluster
}

// crdWaitTimeout bounds the wait for a new CRD's kinds to be served.
const crdWaitTimeout = 30 * time.Second

// fieldValidation is what the memory cluster is told: the server's default
// for clients that send none, like cluster/live.
const fieldValidation = "Warn"

// newEnv creates the case's namespace (prefix + the case's name) and
// prerequisites on the server, waits until they are in effect, and builds a
// memory cluster from the same objects. Each test runs the cases in
// namespaces of its own prefix, so that tests share the server but not
// objects.
func newEnv(ctx context.Context, t *testing.T, s *apiserver.Server, prefix string, tc testCase) *env {
	t.Helper()
	e := &env{srv: s, ns: prefix + tc.name}
	lc, err := live.New(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	e.live = lc

	prereqs := func() []*unstructured.Unstructured {
		out := []*unstructured.Unstructured{parse(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+e.ns+"}")}
		for _, doc := range splitDocs(tc.prereqs) {
			out = append(out, e.object(ctx, t, doc))
		}
		return out
	}
	objs := prereqs()
	if err := s.Apply(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	policies := false
	for _, o := range objs {
		switch {
		case isAdmissionConfig(o):
			policies = true
		case o.GetKind() == "CustomResourceDefinition":
			e.waitServed(ctx, t, o)
		}
	}

	state, err := admission.NewState(prereqs()...)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	mc, err := memory.New(mctx, state, admission.Options{
		DisablePlugins:        apiserver.DefaultDisabledAdmissionPlugins,
		FieldValidation:       fieldValidation,
		ServiceClusterIPRange: "10.0.0.0/16",
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mc.Close()
		cancel()
	})
	e.mem = mc
	if policies {
		if tc.probe.want == "" && tc.probe.wantDenied == "" {
			t.Fatalf("case %s has admission configuration in its prereqs but no probe to show it in effect", tc.name)
		}
		probe := tc.probe
		if probe.object == "" {
			probe.object = tc.desired
		}
		e.waitForAdmission(ctx, t, probe)
	}
	return e
}

// isAdmissionConfig reports whether o configures admission: a policy, a
// binding or a webhook configuration.
func isAdmissionConfig(o *unstructured.Unstructured) bool {
	if o.GroupVersionKind().Group != "admissionregistration.k8s.io" {
		return false
	}
	switch o.GetKind() {
	case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return true
	}
	return false
}

// admissionProbe is a write that shows admission configuration in effect:
// a server-side dry-run create whose answer carries the policies' mutation
// (want) or their denial (wantDenied).
type admissionProbe struct {
	// object is YAML of the object to dry-run create (in the case's
	// namespace if namespaced). Empty means the case's desired object.
	object string
	// want is YAML that the dry-run answer must contain (a subset), e.g.
	// the fields a MutatingAdmissionPolicy sets.
	want string
	// wantDenied: the dry run must be refused with a message containing it
	// (a ValidatingAdmissionPolicy or webhook that denies the probe).
	wantDenied string
}

// admissionTimeout bounds the wait for new admission configuration to take
// effect on the server. The sentinel (apiserver.WaitForAdmissionSync)
// usually settles within a second, but kube-apiserver promises nothing:
// policies are recompiled in a loop from informer caches, and some caches
// (paramKind resolution) refresh only every 30 s.
const admissionTimeout = 60 * time.Second

// probeInterval spaces the probe's dry runs.
const probeInterval = 100 * time.Millisecond

// waitForAdmission returns once the server's admission chain demonstrably
// applies the configuration just created: it syncs the harness's sentinels
// (which cover every informer the policy and webhook plugins read), then
// dry-runs p on the server until the answer is what p expects, polling up to
// admissionTimeout, so that no case starts before its policies act. The
// memory cluster compiles its chain when it is built, so the same dry run
// must give the same answer there at once. The probe depends on no
// evaluation order: it checks the answer, not which policy gave it.
func (e *env) waitForAdmission(ctx context.Context, t testing.TB, p admissionProbe) {
	t.Helper()
	waitForAdmission(ctx, t, e.srv, e.live, e.mem, e.object(ctx, t, p.object), p)
}

// waitForAdmission is env.waitForAdmission for a server, its live cluster
// and a memory cluster holding the same configuration (nil: none to check).
func waitForAdmission(ctx context.Context, t testing.TB, s *apiserver.Server, lc *live.Cluster, mc *memory.Cluster, obj *unstructured.Unstructured, p admissionProbe) {
	t.Helper()
	start := time.Now()
	if err := s.WaitForAdmissionSync(ctx); err != nil {
		t.Fatal(err)
	}
	opts := cluster.WriteOptions{FieldManager: "drift-e2e-probe", DryRun: true}
	var unmet string
	attempts := 0
	err := wait.PollUntilContextTimeout(ctx, probeInterval, admissionTimeout, true, func(ctx context.Context) (bool, error) {
		attempts++
		out, err := lc.Create(ctx, obj.DeepCopy(), opts)
		if ctx.Err() != nil {
			return false, nil // cut by the deadline: keep the last answer's reason
		}
		unmet = p.unmet(out, err)
		return unmet == "", nil
	})
	if err != nil {
		t.Fatalf("admission configuration not in effect on the server after %s (%d dry runs of %s): %s",
			admissionTimeout, attempts, cluster.RefOf(obj), unmet)
	}
	if d := time.Since(start); d > time.Second || attempts > 1 {
		t.Logf("admission configuration in effect after %s (%d probe dry runs)", d.Round(time.Millisecond), attempts)
	}
	if mc == nil {
		return
	}
	out, err := mc.Create(ctx, obj.DeepCopy(), opts)
	if unmet := p.unmet(out, err); unmet != "" {
		t.Fatalf("the probe shows the admission configuration in effect on the server, not on memory: %s", unmet)
	}
}

// unmet says why a dry run's answer is not what p expects ("" if it is).
func (p admissionProbe) unmet(out *unstructured.Unstructured, err error) string {
	if p.wantDenied != "" {
		switch {
		case err == nil:
			return "the probe was admitted, want a denial containing " + strconv.Quote(p.wantDenied)
		case !strings.Contains(err.Error(), p.wantDenied):
			return fmt.Sprintf("the probe was refused with %q, want a denial containing %q", err, p.wantDenied)
		}
		return ""
	}
	if err != nil {
		return "the probe was refused: " + err.Error()
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(p.want), &want); err != nil {
		return fmt.Sprintf("the probe's want is not YAML: %v", err)
	}
	if missing := notContained(comparable(out), want, ""); len(missing) > 0 {
		return "the answer lacks " + strings.Join(missing, ", ")
	}
	return ""
}

// waitServed polls until every served version of crd lists objects in the
// case's namespace (or cluster-wide): Established and in discovery (which
// apiserver.Apply waits for) is not yet served by every handler.
func (e *env) waitServed(ctx context.Context, t *testing.T, crd *unstructured.Unstructured) {
	t.Helper()
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if served, _ := vm["served"].(bool); !served {
			continue
		}
		name, _ := vm["name"].(string)
		gvk := schema.GroupVersionKind{Group: group, Version: name, Kind: kind}
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdWaitTimeout, true, func(ctx context.Context) (bool, error) {
			_, lastErr = e.live.List(ctx, gvk, e.ns)
			return lastErr == nil, nil
		})
		if err != nil {
			t.Fatalf("%s not served after %s: %v (last error: %v)", gvk, crdWaitTimeout, err, lastErr)
		}
	}
}

// object parses one YAML document and puts it into the case's namespace if
// its kind is namespaced.
func (e *env) object(ctx context.Context, t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	u := parse(t, doc)
	namespaced, err := e.srv.IsNamespaced(ctx, u.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	if namespaced {
		u.SetNamespace(e.ns)
	}
	return u
}

// parse decodes one YAML document as the API machinery decodes JSON
// (integers as int64).
func parse(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return u
}

func splitDocs(y string) []string {
	var out []string
	for _, doc := range strings.Split(y, "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			out = append(out, doc)
		}
	}
	return out
}

// runStep makes one write of a history on one cluster.
func runStep(ctx context.Context, c cluster.Cluster, st step, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	switch st.op {
	case opApply:
		return c.Apply(ctx, obj, cluster.ApplyOptions{FieldManager: st.manager, Force: st.force})
	case opCreate:
		return c.Create(ctx, obj, cluster.WriteOptions{FieldManager: st.manager})
	case opUpdate:
		current, err := c.Get(ctx, cluster.RefOf(obj))
		if err != nil {
			return nil, err
		}
		mergePatch(current.Object, obj.Object)
		return c.Update(ctx, current, cluster.WriteOptions{FieldManager: st.manager})
	case opClientApply:
		applied, err := withLastApplied(obj)
		if err != nil {
			return nil, err
		}
		return c.Create(ctx, applied, cluster.WriteOptions{FieldManager: st.manager})
	}
	return nil, fmt.Errorf("unknown step operation %q", st.op)
}

// withLastApplied returns obj carrying kubectl's
// last-applied-configuration annotation: obj itself, as JSON.
func withLastApplied(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	out := obj.DeepCopy()
	annotations := out.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[corev1.LastAppliedConfigAnnotation] = string(data)
	out.SetAnnotations(annotations)
	return out, nil
}

// mergePatch merges patch into doc as an RFC 7386 JSON merge patch.
func mergePatch(doc, patch map[string]any) {
	for k, pv := range patch {
		if pv == nil {
			delete(doc, k)
			continue
		}
		pm, isMap := pv.(map[string]any)
		dm, docIsMap := doc[k].(map[string]any)
		if isMap && docIsMap {
			mergePatch(dm, pm)
			continue
		}
		if isMap {
			dm = map[string]any{}
			mergePatch(dm, pm)
			pv = dm
		}
		doc[k] = pv
	}
}

// runHistory makes every step on both clusters, in lockstep, and asserts
// after each that both answered alike and store the same object. After each
// successful apply it repeats the apply and asserts it is a no-op on both
// (same object, resourceVersion unchanged).
func (e *env) runHistory(ctx context.Context, t *testing.T, steps []step) {
	t.Helper()
	for i, st := range steps {
		what := fmt.Sprintf("step %d (%s by %s, force=%v)", i+1, st.op, st.manager, st.force)
		obj := e.object(ctx, t, st.object)
		ref := cluster.RefOf(obj)
		liveOut, liveErr := runStep(ctx, e.live, st, obj.DeepCopy())
		memOut, memErr := runStep(ctx, e.mem, st, obj.DeepCopy())
		written := time.Now() // after both writes
		if st.wantConflict {
			if !apierrors.IsConflict(liveErr) {
				t.Fatalf("%s: the server answered %v, want a conflict (the case is wrong)", what, liveErr)
			}
			compareErrors(t, what, liveErr, memErr)
		} else {
			if liveErr != nil {
				t.Fatalf("%s: server: %v", what, liveErr)
			}
			if memErr != nil {
				t.Fatalf("%s: the server accepted the write, memory answered: %v", what, memErr)
			}
			compareObjects(t, what+": response", liveOut, memOut)
		}
		liveStored, memStored := e.stored(ctx, t, what, ref)
		if st.op != opApply || st.wantConflict {
			continue
		}
		again := what + ": repeated"
		if st.repeatNextSecond {
			waitNextSecond(ctx, t, written)
		}
		liveAgain, liveErr := runStep(ctx, e.live, st, obj.DeepCopy())
		memAgain, memErr := runStep(ctx, e.mem, st, obj.DeepCopy())
		if liveErr != nil || memErr != nil {
			t.Fatalf("%s: server: %v, memory: %v", again, liveErr, memErr)
		}
		noOp(t, again+" on the server", liveStored, liveAgain)
		noOp(t, again+" on memory", memStored, memAgain)
		e.stored(ctx, t, again, ref)
	}
}

// checkStored asserts that the server stores the object of desired with at
// least the fields of want (YAML; nothing if empty).
func (e *env) checkStored(ctx context.Context, t *testing.T, desired, want string) {
	t.Helper()
	if want == "" {
		return
	}
	ref := cluster.RefOf(e.object(ctx, t, desired))
	got, err := e.live.Get(ctx, ref)
	if err != nil {
		t.Fatalf("reading %s from the server: %v", ref, err)
	}
	var w map[string]any
	if err := yaml.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if missing := notContained(comparable(got), w, ""); len(missing) > 0 {
		t.Errorf("the server stores %s without %v (the case is wrong)", ref, missing)
	}
}

// notContained lists the paths of want whose values got lacks. Both are
// generic JSON values; maps are compared key by key, lists item by item
// (same length, each item contained), anything else exactly.
func notContained(got, want any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		gm, _ := got.(map[string]any)
		var out []string
		for k, v := range w {
			out = append(out, notContained(gm[k], v, path+"/"+k)...)
		}
		return out
	case []any:
		gl, ok := got.([]any)
		if !ok || len(gl) != len(w) {
			return []string{fmt.Sprintf("%s=%v (stored: %v)", path, want, got)}
		}
		var out []string
		for i := range w {
			out = append(out, notContained(gl[i], w[i], fmt.Sprintf("%s/%d", path, i))...)
		}
		return out
	}
	if cmp.Equal(got, want) {
		return nil
	}
	return []string{fmt.Sprintf("%s=%v (stored: %v)", path, want, got)}
}

// waitNextSecond waits until the clock (the server's too: it runs in this
// process) is in a later second than since.
func waitNextSecond(ctx context.Context, t *testing.T, since time.Time) {
	t.Helper()
	next := since.Truncate(time.Second).Add(time.Second)
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		return !time.Now().Before(next), nil
	})
	if err != nil {
		t.Fatalf("waiting for the clock to pass %s: %v", next, err)
	}
}

// stored reads the object from both clusters and compares them. Absent on
// both is equal (nil, nil).
func (e *env) stored(ctx context.Context, t *testing.T, what string, ref cluster.Ref) (liveObj, memObj *unstructured.Unstructured) {
	t.Helper()
	liveObj, liveErr := e.live.Get(ctx, ref)
	memObj, memErr := e.mem.Get(ctx, ref)
	if apierrors.IsNotFound(liveErr) && apierrors.IsNotFound(memErr) {
		return nil, nil
	}
	if liveErr != nil || memErr != nil {
		t.Fatalf("%s: reading %s: server: %v, memory: %v", what, ref, liveErr, memErr)
	}
	compareObjects(t, what+": stored "+ref.String(), liveObj, memObj)
	return liveObj, memObj
}

// noOp asserts that a write changed nothing: same object, same
// resourceVersion.
func noOp(t *testing.T, what string, before, after *unstructured.Unstructured) {
	t.Helper()
	if b, a := before.GetResourceVersion(), after.GetResourceVersion(); b != a {
		t.Errorf("%s: resourceVersion changed %s -> %s (managedFields times %s -> %s)", what, b, a,
			managedTimes(before), managedTimes(after))
	}
	if d := cmp.Diff(comparable(before), comparable(after)); d != "" {
		t.Errorf("%s changed the object (-before +after):\n%s", what, d)
	}
}

// managedTimes lists the managers of obj's managedFields with their times.
func managedTimes(obj *unstructured.Unstructured) string {
	var out []string
	for _, mf := range obj.GetManagedFields() {
		when := "-"
		if mf.Time != nil {
			when = mf.Time.UTC().Format(time.RFC3339)
		}
		out = append(out, mf.Manager+"@"+when)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// compareObjects fails the test if the memory cluster's object differs
// from the server's (see comparable for what is left out), or if either
// lists its managedFields out of the server's order.
func compareObjects(t *testing.T, what string, liveObj, memObj *unstructured.Unstructured) {
	t.Helper()
	checkManagedFieldsOrder(t, what+" on the server", liveObj)
	checkManagedFieldsOrder(t, what+" on memory", memObj)
	if d := cmp.Diff(comparable(liveObj), comparable(memObj)); d != "" {
		t.Errorf("%s: memory differs from the server (-server +memory):\n%s", what, d)
	}
}

// managedFieldsLess is the order in which the API server lists
// managedFields entries (k8s.io/apimachinery/pkg/util/managedfields/internal
// sortEncodedManagedFields): by operation, then by time in whole seconds,
// then by manager, apiVersion and subresource.
func managedFieldsLess(p, q metav1.ManagedFieldsEntry) bool {
	if p.Operation != q.Operation {
		return p.Operation < q.Operation
	}
	var ps, qs int64
	if p.Time != nil {
		ps = p.Time.Unix()
	}
	if q.Time != nil {
		qs = q.Time.Unix()
	}
	if ps != qs {
		return ps < qs
	}
	if p.Manager != q.Manager {
		return p.Manager < q.Manager
	}
	if p.APIVersion != q.APIVersion {
		return p.APIVersion < q.APIVersion
	}
	return p.Subresource < q.Subresource
}

// checkManagedFieldsOrder fails the test unless obj lists its managedFields
// in the server's order for the entries' own times.
//
// The order depends on the second each entry was written in, and the two
// clusters write each step a few milliseconds apart: when a second ends in
// between, two Update entries that the server lists [kubectl-create,
// hpa-controller] (written in different seconds) are [hpa-controller,
// kubectl-create] on memory (same second, so by name). comparable therefore
// puts the entries in an order that does not depend on time, and this check
// keeps the order itself honest on each side.
func checkManagedFieldsOrder(t *testing.T, what string, obj *unstructured.Unstructured) {
	t.Helper()
	if !inServerOrder(obj) {
		t.Errorf("%s: managedFields are not in the server's order (operation, second, manager): %s", what, managedTimes(obj))
	}
}

// inServerOrder reports whether obj (nil: none) lists its managedFields as
// the server would, given their times.
func inServerOrder(obj *unstructured.Unstructured) bool {
	if obj == nil {
		return true
	}
	mfs := obj.GetManagedFields()
	return sort.SliceIsSorted(mfs, func(i, j int) bool { return managedFieldsLess(mfs[i], mfs[j]) })
}

// comparable is obj as JSON values without what no two servers share:
// uid, resourceVersion, creationTimestamp and the time of managedFields
// entries. Everything else counts, managedFields (manager, operation,
// apiVersion, fieldsType, fieldsV1, subresource) and generation included;
// managedFields entries are sorted by operation, manager, apiVersion and
// subresource, since their order also depends on their times (see
// checkManagedFieldsOrder).
func comparable(obj *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		panic(err)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, f := range []string{"uid", "resourceVersion", "creationTimestamp"} {
			delete(md, f)
		}
		if mfs, ok := md["managedFields"].([]any); ok {
			for _, mf := range mfs {
				if e, ok := mf.(map[string]any); ok {
					delete(e, "time")
				}
			}
			sort.SliceStable(mfs, func(i, j int) bool { return managedFieldsKey(mfs[i]) < managedFieldsKey(mfs[j]) })
		}
	}
	return m
}

// managedFieldsKey orders a managedFields entry (as JSON values) without its
// time: operation, manager, apiVersion, subresource.
func managedFieldsKey(entry any) string {
	e, _ := entry.(map[string]any)
	var key []string
	for _, f := range []string{"operation", "manager", "apiVersion", "subresource"} {
		v, _ := e[f].(string)
		key = append(key, v)
	}
	return strings.Join(key, "\x00")
}

// compareErrors fails the test unless memory's error is the server's: same
// code, reason, message and details.
func compareErrors(t *testing.T, what string, liveErr, memErr error) {
	t.Helper()
	var ls, ms apierrors.APIStatus
	if !errors.As(liveErr, &ls) {
		t.Fatalf("%s: the server's error is not an API status: %v", what, liveErr)
	}
	if !errors.As(memErr, &ms) {
		t.Errorf("%s: server: %v; memory: %v (not an API status)", what, liveErr, memErr)
		return
	}
	type status struct {
		Code    int32
		Reason  string
		Message string
		Details any
	}
	view := func(s apierrors.APIStatus) status {
		st := s.Status()
		return status{Code: st.Code, Reason: string(st.Reason), Message: st.Message, Details: st.Details}
	}
	if d := cmp.Diff(view(ls), view(ms)); d != "" {
		t.Errorf("%s: memory's error differs from the server's (-server +memory):\n%s", what, d)
	}
}
