// Package gitops reads the settings of the GitOps tools out of the user's
// own objects: Argo CD Applications, the argocd-cm and argocd-cmd-params-cm
// ConfigMaps, Flux Kustomizations, and the per-resource Argo CD annotations
// argocd.argoproj.io/ignore-differences and argocd.argoproj.io/compare-options.
//
// Settings are read the way the tools read them (the Argo CD 3.x settings
// manager and controller, the Flux kustomize-controller v1 API), and turned
// into ignore rules (package drift/ignore) that keep the file and line of
// the object they came from. Settings the tools would reject, or that cannot
// work (a jq expression that does not parse, a JSON pointer without a
// leading "/", an invalid regular expression in a Flux target), are errors
// naming the file:line and the field. Settings the tools accept but silently
// ignore are Warnings.
package gitops
