//go:build e2e

// Package drift checks truce's drift detection against a real
// kube-apiserver: each case writes a history (applies and updates by
// several field managers) to the real server and to truce's in-process
// cluster (cluster/memory), asserts after every step that both store the
// same object, managedFields included, and then that a GitOps tool's drift
// decision comes out the same on both: Flux's (drift.Flux, TestFlux, also
// checked against Flux's own code run on the server) and Argo CD's
// (drift.ArgoLegacy and drift.ArgoServerSide with and without
// IncludeMutationWebhook, TestArgo). TestDelete compares deletes, and
// BenchmarkDriftLive measures the strategies against the real server.
package drift

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/truce-dev/truce/e2e/apiserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The server is shared by every test of the binary, so it is stopped
	// here rather than in a t.Cleanup.
	if err := apiserver.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping kube-apiserver:", err)
	}
	os.Exit(code)
}

// server returns the binary's one kube-apiserver, starting it on first use.
func server(t testing.TB) *apiserver.Server {
	t.Helper()
	start := time.Now()
	s, err := apiserver.Shared(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("kube-apiserver after %s: %s", d.Round(time.Millisecond), s.StartupReport())
	}
	return s
}
