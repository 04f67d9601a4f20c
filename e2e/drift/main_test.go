//go:build e2e

// Package drift checks truce's drift detection against a real
// kube-apiserver: each case writes a history (applies and updates by
// several field managers) to the real server and to truce's in-process
// cluster (cluster/memory), asserts after every step that both store the
// same object, managedFields included, and then that a GitOps tool's drift
// decision comes out the same on both: Flux's (drift.Flux, TestFlux, also
// checked against Flux's own code run on the server) and Argo CD's
// (drift.ArgoLegacy and drift.ArgoServerSide with and without
// IncludeMutationWebhook, TestArgo). TestPredictedSync checks the
// predicted strategy on repositories that bring their own Namespace, CRD or
// policies against the server the repository was applied to in its tool's
// order; TestLintPodSecurityWithParameters checks lint's pod-security rule
// with a policy that reads a custom resource. TestDelete compares deletes,
// and BenchmarkDriftLive measures the strategies against the real server.
package drift

import (
	"os"
	"testing"

	"github.com/truce-dev/truce/e2e/apiserver"
)

func TestMain(m *testing.M) { os.Exit(apiserver.RunShared(m)) }

// server returns the binary's one kube-apiserver, starting it on first use.
func server(t testing.TB) *apiserver.Server {
	t.Helper()
	return apiserver.SharedFor(t)
}
