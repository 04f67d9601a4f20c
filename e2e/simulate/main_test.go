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
