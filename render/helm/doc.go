// Package helm renders Helm charts the way Argo CD and Flux do, with the
// Helm v4 SDK they embed, so that truce sees the objects they would apply.
//
// The pieces follow what the tools run:
//
//   - Load reads a chart directory from a repository as Argo CD's repo
//     server does, running Helm's dependency build (downloader.Manager)
//     when Chart.yaml lists dependencies charts/ lacks; LoadArchive reads
//     a packaged chart.
//   - Puller fetches charts from HTTP(S) chart repositories and OCI
//     registries with Helm's getters, index and registry client, caches
//     them, and makes whatever needs the network while offline a
//     *render.Unpredictable naming it.
//   - ArgoValues.Merge computes the values helm template gets from an
//     Argo CD Application; MergeFlux, SetValue and FluxValues do the same
//     for a HelmRelease's valuesFrom and values.
//   - Render is helm template: the steps of Helm's install action with a
//     client-only dry run, taken from it with Helm's chart, engine and
//     sorter packages (install.go; pkg/action is not linked), decoded
//     with manifest.Decode, every object traced to its template file.
//
// Helm does none of its network work under a context or a size limit, and
// its template engine cannot be interrupted; this package bounds the first
// at the connection level (Puller.MaxDownloadBytes, contexts) and runs the
// second in a worker process (package isolate), killed at a deadline and
// surviving a template recursion that exhausts the stack (see Render).
package helm
