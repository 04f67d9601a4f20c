package reconcile

import (
	"context"
	"fmt"

	"github.com/truce-dev/truce/cluster"
)

// prune deletes the objects that left Git, in reverse apply order (so
// Namespaces and CRDs go last), but only those whose tracking id names
// themselves: a copy another tool made from one of truce's objects
// carries the original's id and is not truce's to delete. It returns the
// objects that could not be deleted, to keep in the inventory.
func (r *Reconciler) prune(ctx context.Context, p *pass, leftovers []cluster.Ref, res *Result) []cluster.Ref {
	var kept []cluster.Ref
	for i := len(leftovers) - 1; i >= 0; i-- {
		ref := leftovers[i]
		live, err := r.get(ctx, ref)
		if err != nil {
			kept = append(kept, ref)
			res.Errors = append(res.Errors, fmt.Sprintf("%s: not pruned: %s", ref, describeErr("reading it", err)))
			continue
		}
		if live == nil {
			continue // gone already
		}
		want := TrackingID(r.opts.Namespace, r.opts.Name, ref)
		if got := trackingOf(live); got != want {
			why := "it has no tracking id"
			if got != "" {
				why = fmt.Sprintf("its tracking id %q names another object or sync (a copy)", got)
			}
			res.Objects = append(res.Objects, ObjectResult{Ref: ref, Action: Skipped, Note: "not pruned: " + why})
			continue
		}
		if !r.opts.DryRun {
			if err := r.delete(ctx, p, ref); err != nil {
				kept = append(kept, ref)
				res.Errors = append(res.Errors, fmt.Sprintf("%s: not pruned: %s", ref, describeErr("deleting it", err)))
				continue
			}
			r.recorder.Event(ref, "Normal", "Pruned", "deleted: it left Git ("+res.Revision+")")
		}
		res.Pruned = append(res.Pruned, ref)
		res.Objects = append(res.Objects, ObjectResult{Ref: ref, Action: Pruned})
	}
	// kept was collected in deletion order; the inventory wants apply order.
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return kept
}
