//go:build e2e

package apiserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Starting kube-apiserver costs seconds, so test binaries share servers:
// Shared starts at most one per distinct set of disabled admission plugins
// (the only start option a case can vary) and keeps it until StopShared,
// which TestMain calls after m.Run.

var (
	sharedMu      sync.Mutex
	sharedServers = map[string]*sharedServer{}
)

type sharedServer struct {
	once sync.Once
	srv  *Server
	err  error
}

// SharedPolicyRefreshInterval is the PolicyRefreshInterval of shared servers.
const SharedPolicyRefreshInterval = 100 * time.Millisecond

// Shared returns the process-wide server started with the given disabled
// admission plugins (nil: DefaultDisabledAdmissionPlugins), starting it on
// first use. A failed start is remembered and returned to every caller.
func Shared(ctx context.Context, disabledPlugins []string) (*Server, error) {
	if disabledPlugins == nil {
		disabledPlugins = DefaultDisabledAdmissionPlugins
	}
	key := strings.Join(sortedCopy(disabledPlugins), ",")
	sharedMu.Lock()
	ss, ok := sharedServers[key]
	if !ok {
		ss = &sharedServer{}
		sharedServers[key] = ss
	}
	sharedMu.Unlock()
	ss.once.Do(func() {
		ss.srv, ss.err = Start(ctx, Options{
			DisableAdmissionPlugins: sortedCopy(disabledPlugins),
			PolicyRefreshInterval:   SharedPolicyRefreshInterval,
		})
	})
	return ss.srv, ss.err
}

// StopShared stops every server Shared started.
func StopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	var errs []error
	for key, ss := range sharedServers {
		if ss.srv != nil {
			errs = append(errs, ss.srv.Stop())
		}
		delete(sharedServers, key)
	}
	return errors.Join(errs...)
}

// RunShared is a test binary's TestMain body: it runs the tests, then stops
// the shared servers (they outlive every test, so no t.Cleanup can), and
// returns the exit code for os.Exit.
func RunShared(m *testing.M) int {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping kube-apiserver:", err)
	}
	return code
}

// SharedFor returns the binary's kube-apiserver with every admission plugin
// on, starting it on first use; a slow start is logged with its report.
func SharedFor(t testing.TB) *Server {
	t.Helper()
	start := time.Now()
	s, err := Shared(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("kube-apiserver after %s: %s", d.Round(time.Millisecond), s.StartupReport())
	}
	return s
}
