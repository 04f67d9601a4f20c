//go:build e2e

// Package simulate checks truce's simulation (package simulate) against a
// real kube-apiserver: each case runs simulate.Run twice, once on truce's
// in-process cluster (cluster/memory) and once on the real server through
// cluster/live, with the same GitOps tool, the same other writers and the
// same admission configuration (a real MutatingAdmissionPolicy on the
// server), and asserts that both runs come to the same verdicts, rounds,
// writes and loops. For a loop, a second run on the server without a bound
// on the rounds makes every write of the window, and its count must be the
// one memory predicted by extrapolating from the cycle. Time is virtual on
// both sides, so a run of an hour takes as long as its requests.
//
//	go test -tags e2e -count=1 -v ./e2e/simulate/ [-run 'TestSimulate/hpa-flux$']
package simulate

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
