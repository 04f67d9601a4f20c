// Package simulate runs a GitOps tool against a cluster for a stretch of
// virtual time, with the admission chain in the write path and the other
// controllers that commonly fight GitOps tools (an HPA, cert-manager's
// cainjector, an operator, Kyverno's background controller and generate
// rules) writing beside it, and says per object whether the tool settles,
// stays OutOfSync, loops, prunes, is rejected, or cannot be predicted.
//
// Nothing is special-cased: the tool applies as it applies (Argo CD's
// kubectl three-way merge or server-side apply, Flux's ssa.ResourceManager
// with its drift ignore rules), compares with its own strategy (package
// drift), and schedules itself as it does (Argo CD's self-heal backoff,
// Flux's interval). A loop is what the write log shows: the tool writing
// the same field again and again because someone else keeps changing it.
// The engine only needs cluster.Cluster, so the same run can be repeated
// against a real API server to check the prediction.
//
// Time is virtual: a run of an hour takes as long as the writes it makes.
// Once the schedule and the cluster repeat a state, the rest of the window
// is extrapolated from the cycle instead of being simulated write by write.
package simulate
