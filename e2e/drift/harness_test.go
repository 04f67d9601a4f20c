//go:build e2e

package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// desired is the object in Git.
	desired string
	flux    fluxCase
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

// newEnv creates the case's namespace and prerequisites on the server, waits
// until they are in effect, and builds a memory cluster from the same
// objects.
func newEnv(ctx context.Context, t *testing.T, s *apiserver.Server, tc testCase) *env {
	t.Helper()
	e := &env{srv: s, ns: "drift-" + tc.name}
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
		switch o.GetKind() {
		case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
			"ValidatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			policies = true
		case "CustomResourceDefinition":
			e.waitServed(ctx, t, o)
		}
	}
	if policies {
		if err := s.WaitForAdmissionSync(ctx); err != nil {
			t.Fatal(err)
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
	return e
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
func (e *env) object(ctx context.Context, t *testing.T, doc string) *unstructured.Unstructured {
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
func parse(t *testing.T, doc string) *unstructured.Unstructured {
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
	}
	return nil, fmt.Errorf("unknown step operation %q", st.op)
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
// generic JSON values.
func notContained(got, want any, path string) []string {
	wm, ok := want.(map[string]any)
	if !ok {
		if cmp.Equal(got, want) {
			return nil
		}
		return []string{fmt.Sprintf("%s=%v (stored: %v)", path, want, got)}
	}
	gm, _ := got.(map[string]any)
	var out []string
	for k, v := range wm {
		out = append(out, notContained(gm[k], v, path+"/"+k)...)
	}
	return out
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
// from the server's (see comparable for what is left out).
func compareObjects(t *testing.T, what string, liveObj, memObj *unstructured.Unstructured) {
	t.Helper()
	if d := cmp.Diff(comparable(liveObj), comparable(memObj)); d != "" {
		t.Errorf("%s: memory differs from the server (-server +memory):\n%s", what, d)
	}
}

// comparable is obj as JSON values without what no two servers share:
// uid, resourceVersion, creationTimestamp and the time of managedFields
// entries. Everything else counts, managedFields (manager, operation,
// apiVersion, fieldsType, fieldsV1, subresource, in order) and generation
// included.
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
		}
	}
	return m
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
