//go:build e2e

package drift

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/e2e/apiserver"
)

// deleteObjects are what the delete tests put in a namespace: built-ins,
// a Secret and a custom resource.
var deleteObjects = []string{configMap, secret, deployment, widget}

// namespaceDeletionTimeout bounds the harness's stand-in for the namespace
// controller on the server.
const namespaceDeletionTimeout = 60 * time.Second

// TestDelete compares cluster/memory's Delete with the server's: the
// answers (errors included: code, reason, message, details) and what is
// stored afterwards.
func TestDelete(t *testing.T) {
	s := server(t)
	ctx := context.Background()

	t.Run("object", func(t *testing.T) {
		e := newEnv(ctx, t, s, "drift-", testCase{name: "delete-object", prereqs: widgetCRD})
		refs := e.createAll(ctx, t, deleteObjects)
		for i, ref := range refs {
			e.compareDelete(ctx, t, "dry-run delete of "+ref.String(), ref, true)
			if l, _ := e.stored(ctx, t, "after a dry-run delete", ref); l == nil {
				t.Fatalf("a dry-run delete removed %s", ref)
			}
			e.compareDelete(ctx, t, "delete of "+ref.String(), ref, false)
			e.compareGone(ctx, t, ref)
			// Deleting again is a NotFound on both.
			liveErr, _ := e.compareDelete(ctx, t, "second delete of "+ref.String(), ref, false)
			if !apierrors.IsNotFound(liveErr) {
				t.Errorf("second delete of %s: the server answered %v, want NotFound", ref, liveErr)
			}
			// The others are untouched.
			for _, other := range refs[i+1:] {
				if l, _ := e.stored(ctx, t, "after deleting "+ref.String(), other); l == nil {
					t.Errorf("deleting %s removed %s", ref, other)
				}
			}
		}
	})

	t.Run("namespace", func(t *testing.T) {
		e := newEnv(ctx, t, s, "drift-", testCase{name: "delete-namespace", prereqs: widgetCRD})
		refs := e.createAll(ctx, t, deleteObjects)
		nsRef := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: e.ns}
		e.compareDelete(ctx, t, "dry-run delete of namespace "+e.ns, nsRef, true)
		// The namespace itself is only checked for presence: the server's
		// was created by the harness, memory's is seeded state (no
		// managedFields).
		for _, c := range []cluster.Cluster{e.live, e.mem} {
			if _, err := c.Get(ctx, nsRef); err != nil {
				t.Fatalf("after a dry-run delete of namespace %s: %v", e.ns, err)
			}
		}
		for _, ref := range refs {
			if l, _ := e.stored(ctx, t, "after a dry-run delete of the namespace", ref); l == nil {
				t.Fatalf("a dry-run delete of namespace %s removed %s", e.ns, ref)
			}
		}
		e.compareDelete(ctx, t, "delete of namespace "+e.ns, nsRef, false)
		// The memory cluster removes the contents at once; the server
		// marks the namespace Terminating and leaves the rest to
		// kube-controller-manager's namespace controller, which the test
		// server does not run: the harness does its job, then compares
		// the end states.
		finishNamespaceDeletion(ctx, t, s, e.ns)
		for _, ref := range append([]cluster.Ref{nsRef}, refs...) {
			e.compareGone(ctx, t, ref)
		}
		// Writing into the namespace that is gone: NotFound on both.
		obj := e.object(ctx, t, configMap)
		_, liveErr := e.live.Create(ctx, obj.DeepCopy(), cluster.WriteOptions{FieldManager: flux})
		_, memErr := e.mem.Create(ctx, obj.DeepCopy(), cluster.WriteOptions{FieldManager: flux})
		if !apierrors.IsNotFound(liveErr) {
			t.Fatalf("create in the deleted namespace: the server answered %v, want NotFound", liveErr)
		}
		compareErrors(t, "create in the deleted namespace", liveErr, memErr)
		// Deleting it again is a NotFound on both.
		e.compareDelete(ctx, t, "second delete of namespace "+e.ns, nsRef, false)
	})

	t.Run("system-namespace", func(t *testing.T) {
		// NamespaceLifecycle refuses to delete these; dry runs, so that a
		// cluster that does delete them is not broken for the tests after.
		e := newEnv(ctx, t, s, "drift-", testCase{name: "delete-system-namespace"})
		for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic} {
			ref := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: ns}
			liveErr, _ := e.compareDelete(ctx, t, "dry-run delete of namespace "+ns, ref, true)
			if !apierrors.IsForbidden(liveErr) {
				t.Errorf("dry-run delete of namespace %s: the server answered %v, want Forbidden", ns, liveErr)
			}
		}
	})
}

// createAll creates docs on both clusters (as kubectl create) and returns
// their references.
func (e *env) createAll(ctx context.Context, t *testing.T, docs []string) []cluster.Ref {
	t.Helper()
	var steps []step
	var refs []cluster.Ref
	for _, doc := range docs {
		steps = append(steps, step{op: opCreate, manager: "kubectl-create", object: doc})
		refs = append(refs, cluster.RefOf(e.object(ctx, t, doc)))
	}
	e.runHistory(ctx, t, steps)
	return refs
}

// compareDelete deletes ref on both clusters and asserts the same answer:
// both succeed, or both fail with the same error. It returns the errors.
func (e *env) compareDelete(ctx context.Context, t *testing.T, what string, ref cluster.Ref, dryRun bool) (liveErr, memErr error) {
	t.Helper()
	opts := cluster.DeleteOptions{DryRun: dryRun}
	liveErr = e.live.Delete(ctx, ref, opts)
	memErr = e.mem.Delete(ctx, ref, opts)
	switch {
	case liveErr == nil && memErr != nil:
		t.Errorf("%s: the server deleted it, memory answered %v", what, memErr)
	case liveErr != nil && memErr == nil:
		t.Errorf("%s: the server answered %v, memory deleted it", what, liveErr)
	case liveErr != nil:
		compareErrors(t, what, liveErr, memErr)
	}
	return liveErr, memErr
}

// compareGone asserts that ref is gone from both clusters: a read is the
// same NotFound on both, and a list of its kind in its namespace does not
// show it on either.
func (e *env) compareGone(ctx context.Context, t *testing.T, ref cluster.Ref) {
	t.Helper()
	_, liveErr := e.live.Get(ctx, ref)
	_, memErr := e.mem.Get(ctx, ref)
	if !apierrors.IsNotFound(liveErr) {
		t.Fatalf("reading %s after its delete: the server answered %v, want NotFound", ref, liveErr)
	}
	compareErrors(t, "reading "+ref.String()+" after its delete", liveErr, memErr)
	for side, c := range map[string]cluster.Cluster{"server": e.live, "memory": e.mem} {
		items, err := c.List(ctx, ref.GroupVersionKind, ref.Namespace)
		if err != nil {
			t.Errorf("listing %s in %q on %s: %v", ref.Kind, ref.Namespace, side, err)
			continue
		}
		for _, it := range items {
			if it.GetName() == ref.Name && it.GetNamespace() == ref.Namespace {
				t.Errorf("%s is deleted but still listed on %s", ref, side)
			}
		}
	}
}

// finishNamespaceDeletion does on the server what kube-controller-manager's
// namespace controller does for a Terminating namespace: delete everything
// in it, remove the "kubernetes" finalizer and delete the namespace for
// good. It polls until the namespace is gone.
func finishNamespaceDeletion(ctx context.Context, t *testing.T, s *apiserver.Server, ns string) {
	t.Helper()
	lists, err := s.Clientset().Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatalf("discovering namespaced resources: %v", err)
	}
	zero := int64(0)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "list") || !hasVerb(r.Verbs, "delete") {
				continue
			}
			ri := s.Dynamic().Resource(gv.WithResource(r.Name)).Namespace(ns)
			items, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s in %s: %v", r.Name, ns, err)
			}
			for _, it := range items.Items {
				err := ri.Delete(ctx, it.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatalf("deleting %s %s/%s: %v", r.Name, ns, it.GetName(), err)
				}
			}
		}
	}
	namespaces := s.Clientset().CoreV1().Namespaces()
	var state string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, namespaceDeletionTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		state = fmt.Sprintf("phase %s, finalizers %v", n.Status.Phase, n.Spec.Finalizers)
		if len(n.Spec.Finalizers) > 0 {
			n.Spec.Finalizers = nil
			if _, err := namespaces.Finalize(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return false, err
			}
			return false, nil
		}
		// Finalized: delete once more, as the controller does, for the
		// registry to remove it.
		if err := namespaces.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("namespace %s not gone from the server after %s (%s): %v", ns, namespaceDeletionTimeout, state, err)
	}
}

func hasVerb(verbs metav1.Verbs, verb string) bool {
	for _, v := range verbs {
		if v == verb {
			return true
		}
	}
	return false
}
