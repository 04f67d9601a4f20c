//go:build e2e

package sync

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/reconcile"
)

// interrupting cancels a pass's context after its n-th write (apply or
// delete, dry runs not counted), as a process killed mid-pass stops.
type interrupting struct {
	cluster.Cluster
	n      int64
	writes atomic.Int64
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *interrupting) wrote() {
	if c.writes.Add(1) == c.n {
		if cancel := c.cancel.Load(); cancel != nil {
			(*cancel)()
		}
	}
}

func (c *interrupting) Apply(ctx context.Context, obj *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, error) {
	out, err := c.Cluster.Apply(ctx, obj, opts)
	if err == nil && !opts.DryRun {
		c.wrote()
	}
	return out, err
}

// extraConfigMaps are n ConfigMaps x-0 … in the case's namespace.
func extraConfigMaps(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x-%d, namespace: NS}\ndata: {i: %q}\n", i, fmt.Sprint(i))
	}
	return b.String()
}

// TestInterruptedPassOrphans: a pass that is interrupted (its process
// killed) after creating some new objects, followed by a revision that
// drops them again: the objects carry truce's own tracking id and truce
// applied them, so prune must delete them.
// (A pass records the inventory, extended by what it may create, before
// its first write.)
func TestInterruptedPassOrphans(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orphans", false)
	opts := e.options()
	opts.Prune = true
	opts.Concurrency = 1
	c := &interrupting{Cluster: e.live, n: -1}
	base := pruneNamespace + "---" + pruneKeep
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.decode(base)}
	store := &reconcile.MemoryStore{}
	r, err := reconcile.New(c, source{src}, store, opts)
	must(t, err)
	res := e.pass(r)
	if !res.Synced() || res.Count(reconcile.Created) != 2 {
		t.Fatalf("first pass: %s", describe(res))
	}

	// Revision 2 adds ten ConfigMaps; the pass is interrupted after three.
	src.Objects, src.Revision = e.decode(base+extraConfigMaps(10)), "main@sha1:2"
	c.writes.Store(0)
	c.n = 3
	ctx, cancel := context.WithTimeout(e.ctx, passTimeout)
	c.cancel.Store(&cancel)
	res, err = r.Reconcile(ctx)
	cancel()
	c.cancel.Store(nil)
	if err == nil && (res == nil || len(res.Errors) == 0) {
		t.Fatalf("the interrupted pass reported nothing: %s", describe(res))
	}
	var created []string
	for i := range 10 {
		if e.get(configMapGVK, e.ns, fmt.Sprintf("x-%d", i)) != nil {
			created = append(created, fmt.Sprintf("x-%d", i))
		}
	}
	t.Logf("interrupted pass: err %v; created %v", err, created)
	if len(created) == 0 || len(created) == 10 {
		t.Fatalf("the interruption did not land mid-pass: %d of 10 created", len(created))
	}

	// Revision 3 drops them again.
	src.Objects, src.Revision = e.decode(base), "main@sha1:3"
	res = e.pass(r)
	if !res.Synced() {
		t.Fatalf("third pass: %s", describe(res))
	}
	for _, name := range created {
		if cm := e.get(configMapGVK, e.ns, name); cm != nil {
			t.Errorf("%s left Git and was not pruned (tracking id %q; pruned %v; inventory %v)", name,
				cm.GetAnnotations()[reconcile.TrackingAnnotation], res.Pruned, store.Last().State.Inventory)
		}
	}
}
