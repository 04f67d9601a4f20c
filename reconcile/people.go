package reconcile

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
)

// KubectlFieldManager starts the name of every field manager kubectl
// writes as: "kubectl" (the user agent: kubectl scale, kubectl apply
// --server-side), "kubectl-edit", "kubectl-patch",
// "kubectl-client-side-apply", "kubectl-label" and the rest.
//
// Flux decides the same way which writes are kubectl's: the
// kustomize-controller's apply cleanup (internal/controller/
// kustomization_controller.go, apply) lists ssa.FieldManager{Name:
// "kubectl"} for the Apply and the Update operation, and fluxcd/pkg/ssa
// matches a FieldManager without ExactMatch by prefix (patch.go,
// matchFieldManager), so that a kubectl edit is folded into Flux's
// ownership and reverted. Flux matches main-resource entries only, because
// it rewrites them into its own apply entry; truce only asks who wrote, so
// kubectl scale's entry on the scale subresource is a person's too.
const KubectlFieldManager = "kubectl"

// IsHuman reports whether manager's writes are a person's: kubectl's, as
// Flux decides it, or a manager HumanFieldManagers names (k9s, Lens, a
// console), matched by prefix as Flux matches --override-manager.
func (o LoopOptions) IsHuman(manager string) bool {
	if strings.HasPrefix(manager, KubectlFieldManager) {
		return true
	}
	for _, name := range o.HumanFieldManagers {
		if name != "" && strings.HasPrefix(manager, name) {
			return true
		}
	}
	return false
}

// editsByPeople returns the drifted fields whose last writer is a person
// (IsHuman), as the edits a write of predicted reverts, and the other
// drifted fields, for the loop breaker.
func (r *Reconciler) editsByPeople(ref cluster.Ref, live, predicted *unstructured.Unstructured, drifted []string) (edits []ManualEdit, others []string) {
	pv, lv := view(predicted), view(live)
	for _, ptr := range drifted {
		w := r.lastWriter(live, ptr)
		if w == nil || !r.opts.Loop.IsHuman(w.Manager) {
			others = append(others, ptr)
			continue
		}
		toks := parse(ptr)
		gitValue, _ := get(pv, toks)
		liveValue, _ := get(lv, toks)
		edits = append(edits, ManualEdit{Ref: ref, Pointer: ptr, Writer: *w, Git: gitValue, Live: liveValue})
	}
	return edits, others
}

// reverted reports the people's edits a write reverted: an Event on the
// object and the metric (the controller logs them from the Result).
func (r *Reconciler) reverted(edits []ManualEdit) {
	for _, e := range edits {
		r.metrics.Reverted(e)
		r.recorder.Event(e.Ref, "Warning", ReasonEditedOutsideGit, fmt.Sprintf(
			"%s was edited outside Git by field manager %s (%s): truce reverted it to Git's value %s (it was %s)",
			e.Pointer, e.Writer.Manager, e.Writer.Operation, short(e.Git), short(e.Live)))
	}
}

// ReasonEditedOutsideGit is the reason of the Event that reports a
// person's edit truce reverted.
const ReasonEditedOutsideGit = "EditedOutsideGit"
