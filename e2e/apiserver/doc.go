// Package apiserver is truce's end-to-end harness: it runs a real
// kube-apiserver (the same release truce emulates) in-process, backed by an
// embedded etcd, and offers the helpers the differential tests need to put a
// case's cluster state in place, send a write through the real admission
// chain as a server-side dry run, and read back what the server did.
//
// The server side (Start, Shared, StopShared) imports
// k8s.io/kubernetes/cmd/kube-apiserver/app/testing and therefore lives behind
// the "e2e" build tag: compiling kube-apiserver costs minutes, and plain
// `go build ./...`, `go vet ./...` and `go test ./...` must stay fast. The
// client-side helpers (Apply, Cleanup, DryRunCreate, AuditAnnotations, the
// admission sentinel, ...) only need client-go and are untagged so they are
// compiled and vetted on every build.
//
// Nothing outside e2e/ may import this package.
package apiserver

// ServiceClusterIPRange is the --service-cluster-ip-range that
// k8s.io/kubernetes/cmd/kube-apiserver/app/testing.StartTestServer sets;
// truce is told the same, as a user tells it their cluster's.
const ServiceClusterIPRange = "10.0.0.0/16"
