// Package reconcile is truce's GitOps side: a reconciler that applies the
// objects of a Git revision to a cluster with server-side apply, like Flux's
// kustomize-controller, but told about admission and about the other
// writers of each object:
//
//   - drift is decided against what the API server would store (a
//     server-side apply dry run through admission, or truce's offline
//     prediction), so a mutation admission makes is not drift;
//   - ignore rules strip a field from the payload when another Apply
//     manager owns it and adopt the live value when only truce does
//     (Flux's documented semantics), Argo CD style rules included;
//   - a field that truce writes back and an automated writer changes again
//     N times within a window is Contested: truce stops writing it, names
//     the other writer (a field manager, or the admission policy found by
//     replaying the cluster's admission configuration offline) and the fix;
//     people's edits (kubectl's field managers, as Flux tells them, and
//     LoopOptions.HumanFieldManagers) are written back on every pass and
//     never contested;
//   - prune deletes only objects whose tracking annotation names them, that
//     truce applied (its inventory) and that left Git, never after a
//     partial read.
//
// One Reconcile is one pass; reconcile/controller runs passes on an
// interval with self-heal backoff. State that must survive a restart (inventory,
// contested fields) is kept by a Store.
package reconcile
