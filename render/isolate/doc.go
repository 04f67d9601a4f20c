// Package isolate runs template evaluation (Helm's engine, go-jsonnet) in a
// child process, so that hostile input cannot take truce down with it.
//
// Go's runtime aborts the whole process when a goroutine's stack reaches
// its limit, and that abort cannot be recovered: a Helm chart whose
// templates call themselves through tpl without end, or a Jsonnet program
// recursing through tailstrict, would otherwise end truce with a goroutine
// dump. Argo CD's repo-server runs helm template as a child process for
// the same reason. Here the child is truce's own executable, re-executed
// with EnvVar set: Main, called first thing in main (and in TestMain of
// the packages that render), serves jobs in that mode and returns at once
// otherwise.
//
// A Runner keeps long-lived workers (spawned on first use, reused for many
// jobs, replaced after they die) and exchanges length-prefixed frames with
// them over stdin and stdout. A context that ends kills the worker running
// the job. A worker's death becomes a *WorkerError carrying the first lines
// of what it printed to its stderr, which truce's own stderr never sees.
//
// When the executable cannot serve jobs (Main was not called in this
// process, or the child does not answer the handshake) Do returns
// ErrUnavailable and callers evaluate in process, as before.
package isolate
