// Package flux predicts what Flux applies, with Flux's own libraries.
//
// Build builds a Flux Kustomization the way kustomize-controller v1.10
// does: fluxcd/pkg/kustomize generates or amends the kustomization file
// (spec.patches, images, namePrefix, nameSuffix, targetNamespace,
// components), builds it confined to the source's root without remote
// bases or plugins, and runs postBuild substitution with the world's
// ConfigMaps and Secrets standing in for the cluster. The user's files are
// never written: the generated kustomization lives in memory.
//
// ArtifactCopy lays out an ExternalArtifact the way source-watcher's
// ArtifactGenerator copies files from its sources.
//
// ParseHelmRelease, Values and PostRender prepare a HelmRelease the way
// helm-controller v1.6 does: release name and namespaces, chart source,
// values composed from valuesFrom and values, and the post-renderers
// (kustomize patches and images, common metadata, origin labels). The chart
// itself is rendered by render/helm.
package flux
