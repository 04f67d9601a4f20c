// Package argocd computes GitOps drift exactly as Argo CD does.
//
// It reimplements, on the upstream Kubernetes libraries, the diff algorithms
// of Argo CD's gitops-engine (github.com/argoproj/gitops-engine, file
// pkg/diff/diff.go), which cannot be built inside this module:
//
//   - the legacy diff (Diff, ThreeWayDiff, TwoWayDiff): a three-way merge patch
//     of the last-applied-configuration, the Git manifest and the live object,
//     applied to the live object to predict what a sync would store, with the
//     built-in types' scheme defaults applied to both sides;
//   - the server-side diff (ServerSideDiff, RemoveWebhookMutation): the answer
//     of a server-side apply dry run compared with the live object, with the
//     changes of mutating webhooks removed unless IncludeMutationWebhook=true;
//   - Fields, which turns a result into per-field changes addressed by RFC 6901
//     JSON pointers, the spelling of Argo CD's ignoreDifferences.jsonPointers.
//
// All functions are pure: the caller fetches live objects and runs dry runs.
package argocd
