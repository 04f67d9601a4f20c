// Package argocd renders the sources of Argo CD Applications the way Argo
// CD 3.x's repo-server does: it detects a source's type from its directory
// (SourceType), reads directory sources with their recurse, include and
// exclude settings and their Jsonnet files (Directory), and builds
// kustomizations after applying the Application's kustomize options
// (Kustomize). Helm sources are rendered by package render/helm.
//
// Each function follows the repo-server's code (reposerver/repository and
// util/kustomize of Argo CD v3.6), with the upstream libraries Argo CD uses
// where they can be shared: go-jsonnet, gobwas/glob and kustomize's own
// types. The differences are deliberate and documented where they are:
// everything stays inside the repository, nothing reaches the network, and
// input is bounded by the manifest.Options limits.
package argocd
