//go:build e2e

package sync

import (
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/reconcile"
)

const (
	pruneNamespace = `
apiVersion: v1
kind: Namespace
metadata: {name: NS}
`
	pruneSettings = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {mode: blue}
`
	pruneKeep = `
apiVersion: v1
kind: ConfigMap
metadata: {name: keep, namespace: NS}
data: {mode: green}
`
)

// TestPruneSkipsCopies: with prune on, a ConfigMap that leaves Git is
// deleted, but not a copy of it another tool made (a Kyverno clone carries
// the original's tracking id, which names the original, not the copy);
// when everything leaves Git, the Namespace is deleted last.
func TestPruneSkipsCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "prune", false)
	opts := e.options()
	opts.Prune = true
	r, src, store := e.newReconciler(pruneNamespace+"---"+pruneSettings+"---"+pruneKeep, opts)

	res := e.pass(r)
	if res.Count(reconcile.Created) != 3 || res.Writes != 3 || !res.Synced() {
		t.Fatalf("first pass: want 3 Created: %s", describe(res))
	}
	settings := e.get(configMapGVK, e.ns, "settings")
	id := settings.GetAnnotations()[reconcile.TrackingAnnotation]
	if want := reconcile.TrackingID(e.ns, "sync", cluster.RefOf(settings)); id != want {
		t.Fatalf("tracking id %q, want %q", id, want)
	}

	// Kyverno's generate with clone: a copy carrying the same annotations.
	cp := settings.DeepCopy()
	cp.SetName("settings-copy")
	cp.SetResourceVersion("")
	cp.SetUID("")
	cp.SetManagedFields(nil)
	delete(cp.Object["metadata"].(map[string]any), "creationTimestamp")
	if _, err := e.live.Create(e.ctx, cp, cluster.WriteOptions{FieldManager: "kyverno"}); err != nil {
		t.Fatal(err)
	}

	// Git drops settings.
	src.Objects, src.Revision = e.decode(pruneNamespace+"---"+pruneKeep), "main@sha1:2"
	res = e.pass(r)
	if len(res.Pruned) != 1 || res.Pruned[0].Kind != "ConfigMap" || res.Pruned[0].Name != "settings" || res.Writes != 1 || !res.Synced() {
		t.Fatalf("want settings pruned with 1 write: %s", describe(res))
	}
	if o := object(res, "ConfigMap", "settings-copy"); o != nil && o.Action == reconcile.Pruned {
		t.Fatalf("the copy was pruned: %s", describe(res))
	}
	if e.get(configMapGVK, e.ns, "settings") != nil {
		t.Fatal("settings left Git and is still there")
	}
	copyLive := e.get(configMapGVK, e.ns, "settings-copy")
	if copyLive == nil {
		t.Fatal("the copy was deleted")
	}
	if copyLive.GetAnnotations()[reconcile.TrackingAnnotation] != id {
		t.Fatalf("the copy's tracking id changed: %v", copyLive.GetAnnotations())
	}
	for _, ref := range store.Last().State.Inventory {
		if ref.Name == "settings" || ref.Name == "settings-copy" {
			t.Fatalf("inventory after the prune still lists %s: %v", ref, store.Last().State.Inventory)
		}
	}
	if e.get(configMapGVK, e.ns, "keep") == nil {
		t.Fatal("keep is gone")
	}

	// Everything leaves Git: keep goes, then the Namespace.
	src.Objects, src.Revision = nil, "main@sha1:3"
	res = e.pass(r)
	if len(res.Pruned) != 2 || res.Pruned[0].Kind != "ConfigMap" || res.Pruned[0].Name != "keep" ||
		res.Pruned[1].Kind != "Namespace" || res.Pruned[1].Name != e.ns || !res.Synced() {
		t.Fatalf("want keep pruned, then the Namespace: %s", describe(res))
	}
	if e.get(configMapGVK, e.ns, "keep") != nil {
		t.Fatal("keep left Git and is still there")
	}
	// No namespace controller runs here: the Namespace stays Terminating
	// with its remaining contents.
	if ns := e.get(namespaceGVK, "", e.ns); ns != nil && ns.GetDeletionTimestamp() == nil {
		t.Fatalf("the Namespace was not deleted: %v", ns.Object["status"])
	}
	if inv := store.Last().State.Inventory; len(inv) != 0 {
		t.Fatalf("inventory after everything left Git: %v", inv)
	}
	res = e.pass(r)
	if res.Writes != 0 || len(res.Pruned) != 0 || !res.Synced() {
		t.Fatalf("the pass after: want nothing to do: %s", describe(res))
	}
}
