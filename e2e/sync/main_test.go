//go:build e2e

// Package sync checks truce's GitOps reconciler (package reconcile, "truce
// sync") against a real kube-apiserver: every case builds
// reconcile.New(live.New(restConfig), ...) on the binary's shared server
// (e2e/apiserver) and drives passes by hand, asserting writes,
// resourceVersions, managedFields, Events and prune decisions as the server
// stores them.
//
//   - TestImageMirrorToldAboutAdmission: a MutatingAdmissionPolicy rewrites
//     the image; with server dry-run drift detection that is no drift.
//   - TestImageMirrorLoopBroken: offline drift detection without the policy
//     fights it; the loop breaker stops after Threshold writes, names the
//     policy and records a Contested Event; the policy's binding going away
//     lifts the contest.
//   - TestPeopleAreRevertedNeverContested: five kubectl edits of one field
//     (scale, edit, patch, apply, apply --server-side, run against the
//     server) are written back five times and never contested, each an
//     Event, a metric and the GitSync's count; a controller changing the
//     field is contested and named.
//   - TestIgnoreStripHPA, TestIgnoreAdoptKubectlEdit: ignore rules against
//     another Apply manager (strip) and an Update manager (adopt).
//   - TestPruneSkipsCopies: prune deletes what left Git and names itself,
//     not a copy carrying its tracking id; Namespaces go last.
//   - TestAPIServerGoesAway: the server unreachable mid-life (a loopback
//     proxy stopped): the pass reports errors, prunes nothing, keeps the
//     inventory, and converges once the server is back.
//   - TestKillMidSyncConverges: a sync killed mid-pass (SIGKILL of `truce
//     sync --once --prune --status gitsync`) converges on the next run,
//     with nothing pruned wrongly or duplicated, and prunes by the
//     GitSync's inventory on the run after.
//   - TestGitSyncStatus, TestGitSyncInItsOwnNamespace: the GitSync status
//     as kubectl shows it (revisions, counts, conditions, contested
//     fields, inventory, printer columns) across restarts, also when the
//     revision creates the GitSync's own namespace.
//   - TestCRDsGoFirst, TestCRDsGoFirstNamespaceDefaulted: a CRD and its
//     custom resources (with and without a namespace) in one revision.
//   - TestInterruptedPassOrphans: objects created by an interrupted pass
//     are pruned once they leave Git.
//
// Cases that change the cluster's admission configuration (policies,
// bindings) do not run in parallel with each other: the reconciler's
// admission view digests the whole cluster's configuration and replays a
// contested write when it changes, so another case's policy would be in
// that case's replay. Every case works in its own
// namespace(s) with its own names, so the suite can run with -count=N.
package sync

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
)

func TestMain(m *testing.M) { os.Exit(apiserver.RunShared(m)) }

// server returns the binary's one kube-apiserver, starting it on first use.
func server(t testing.TB) *apiserver.Server {
	t.Helper()
	return apiserver.SharedFor(t)
}

const (
	// caseTimeout bounds a whole case: no case may hang the suite.
	caseTimeout = 3 * time.Minute
	// passTimeout bounds one reconcile pass.
	passTimeout = 90 * time.Second
	// admissionTimeout bounds the wait for new admission configuration to
	// take effect (policies are recompiled from informers in a loop; the
	// project allows ~30 s).
	admissionTimeout = 60 * time.Second
	// pollInterval spaces the polls of the server.
	pollInterval = 100 * time.Millisecond
)

// env is one case: the shared server, a cluster/live client on it and the
// case's namespace.
type env struct {
	t    *testing.T
	ctx  context.Context
	srv  *apiserver.Server
	live *live.Cluster
	ns   string
}

// newEnv names a namespace for the case (prefix plus a random suffix, so
// -count=N runs do not collide) and, if create is set, creates it.
func newEnv(t *testing.T, prefix string, create bool) *env {
	t.Helper()
	return newEnvTimeout(t, prefix, create, caseTimeout)
}

// newEnvTimeout is newEnv for a case bounded by timeout instead of
// caseTimeout.
func newEnvTimeout(t *testing.T, prefix string, create bool, timeout time.Duration) *env {
	t.Helper()
	s := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	lc, err := live.New(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, srv: s, live: lc, ns: unique(prefix)}
	if create {
		_, err := s.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// unique returns prefix-<random hex>.
func unique(prefix string) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// options are the reconciler defaults for a case: the sync is named after
// the case and lives in its namespace (tracking ids and events stay there).
func (e *env) options() reconcile.Options {
	o := reconcile.DefaultOptions()
	o.Name, o.Namespace = "sync", e.ns
	o.WaitTimeout = 30 * time.Second
	return o
}

// source is a StaticSource whose objects and revision a case changes
// between passes.
type source struct{ s *reconcile.StaticSource }

func (f source) Fetch(ctx context.Context) (*reconcile.Snapshot, error) { return f.s.Fetch(ctx) }
func (f source) String() string                                         { return f.s.String() }

// newReconciler is reconcile.New over the case's live cluster with a
// MemoryStore, the source given as YAML.
func (e *env) newReconciler(docs string, opts reconcile.Options, with ...reconcile.Option) (*reconcile.Reconciler, *reconcile.StaticSource, *reconcile.MemoryStore) {
	e.t.Helper()
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.decode(docs)}
	store := &reconcile.MemoryStore{}
	r, err := reconcile.New(e.live, source{src}, store, opts, with...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, src, store
}

// decode reads "---"-separated YAML (as the file git.yaml), replacing the
// namespace "NS" (in metadata.namespace, names and selectors) with the
// case's.
func (e *env) decode(docs string) []manifest.Object {
	e.t.Helper()
	docs = strings.ReplaceAll(docs, "NS", e.ns)
	objs, err := manifest.Decode("git.yaml", strings.NewReader(docs), manifest.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return objs
}

// inNamespace returns the objects of a file with their namespace set to the
// case's (the examples name "shop").
func (e *env) inNamespace(path string) []manifest.Object {
	e.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	objs, err := manifest.Decode(path, bytes.NewReader(b), manifest.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range objs {
		if o.Object.GetNamespace() != "" {
			o.Object.SetNamespace(e.ns)
		}
	}
	return objs
}

// pass runs one pass bounded by passTimeout; an error fails the case.
func (e *env) pass(r *reconcile.Reconciler) *reconcile.Result {
	e.t.Helper()
	res, err := e.tryPass(r)
	if err != nil {
		e.t.Fatalf("pass: %v", err)
	}
	return res
}

func (e *env) tryPass(r *reconcile.Reconciler) (*reconcile.Result, error) {
	ctx, cancel := context.WithTimeout(e.ctx, passTimeout)
	defer cancel()
	return r.Reconcile(ctx)
}

// get reads an object from the server (nil when not found).
func (e *env) get(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	e.t.Helper()
	obj, err := e.live.Get(e.ctx, cluster.Ref{GroupVersionKind: gvk, Namespace: namespace, Name: name})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		e.t.Fatal(err)
	}
	return obj
}

// poll runs cond every pollInterval until it reports done or timeout
// passes; then the case fails with what.
func (e *env) poll(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s: not after %s (last error: %v)", what, timeout, last)
	}
}

// describe summarises a result for failure messages.
func describe(res *reconcile.Result) string {
	if res == nil {
		return "<no result>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "revision %s, writes %d", res.Revision, res.Writes)
	for _, o := range res.Objects {
		fmt.Fprintf(&b, "\n  %s %s", o.Action, o.Ref)
		if len(o.Drifted) > 0 {
			fmt.Fprintf(&b, " drifted %v", o.Drifted)
		}
		if len(o.Ignored) > 0 {
			fmt.Fprintf(&b, " ignored %+v", o.Ignored)
		}
		if o.Error != "" {
			fmt.Fprintf(&b, " error %q", o.Error)
		}
		if o.Note != "" {
			fmt.Fprintf(&b, " note %q", o.Note)
		}
	}
	for _, c := range res.Contested {
		fmt.Fprintf(&b, "\n  contested %s %s by %s (fix %s)", c.Ref, c.Pointer, c.Writer, c.Fix.Kind)
	}
	for _, err := range res.Errors {
		fmt.Fprintf(&b, "\n  error: %s", err)
	}
	if len(res.Pruned) > 0 {
		fmt.Fprintf(&b, "\n  pruned %v", res.Pruned)
	}
	return b.String()
}

// object returns the result of the object named kind/name.
func object(res *reconcile.Result, kind, name string) *reconcile.ObjectResult {
	for i := range res.Objects {
		if res.Objects[i].Ref.Kind == kind && res.Objects[i].Ref.Name == name {
			return &res.Objects[i]
		}
	}
	return nil
}

// owns reports whether manager (with operation "Apply" or "Update") owns
// the field at pointer of obj on the main resource.
func owns(obj *unstructured.Unstructured, pointer, manager, operation string) bool {
	for _, mf := range drift.FieldOwners(obj, pointer) {
		if mf.Manager == manager && string(mf.Operation) == operation && mf.Subresource == "" {
			return true
		}
	}
	return false
}

var (
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	namespaceGVK  = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	eventGVK      = schema.GroupVersionKind{Version: "v1", Kind: "Event"}
	mapGVK        = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicy"}
	mapBindingGVK = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicyBinding"}
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
