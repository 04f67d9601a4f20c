// Package ignore holds GitOps ignore rules: a Rule names the fields a GitOps
// tool must not treat as drift (JSON pointers, jq path expressions, field
// managers) and a Target naming the resources it applies to.
//
// Matching follows the tool that wrote the rule, exactly:
//
//   - Flux (Kustomization .spec.ignore): the target fields are anchored regular
//     expressions and label/annotation selectors, evaluated by Flux's own
//     library (github.com/fluxcd/pkg/ssa/jsondiff). An empty target matches
//     every resource. A path "" ignores the whole resource.
//   - Argo CD (ignoreDifferences, argocd-cm overrides): group and kind are
//     globs ("*" matches anything, an empty group is the core group), name
//     and namespace match exactly when set. jsonPointers are removed with
//     JSON-patch "remove" operations and skipped silently when the path does
//     not exist; jqPathExpressions are evaluated as del(EXPR) with a time
//     limit; managedFieldsManagers hand fields owned by those managers in the
//     live object's managedFields over to the live value.
//
// A Set compiles rules once and answers the questions drift strategies ask:
// what to remove before comparing (Normalize, NormalizeManaged), which rule
// hides a given drifted field (IgnoredBy), and which rules do nothing
// (Ineffective).
package ignore
