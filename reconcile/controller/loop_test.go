package controller

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/truce-dev/truce/reconcile"
)

// deadline bounds every wait of a test for the loop: the loop runs in
// another goroutine, and a bug must fail the test rather than hang it.
const deadline = 10 * time.Second

// fakeClock hands every wait to the test: After reports the duration asked
// for on asked, and the wait ends when the test fires it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []chan time.Time
	asked   chan time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), asked: make(chan time.Duration, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	c.pending = append(c.pending, ch)
	c.mu.Unlock()
	c.asked <- d
	return ch
}

// wait returns the next duration the loop waits for.
func (c *fakeClock) wait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.asked:
		return d
	case <-time.After(deadline):
		t.Fatal("the loop did not wait")
		return 0
	}
}

// fire ends the oldest wait, advancing the clock by d.
func (c *fakeClock) fire(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := c.pending[0]
	c.pending = c.pending[1:]
	ch <- c.now
}

// outcome is what one fake pass returns.
type outcome struct {
	res *reconcile.Result
	err error
}

// fakeRunner returns the outcomes it is sent, one per pass, and reports
// each pass's context on passes.
type fakeRunner struct {
	outcomes chan outcome
	passes   chan context.Context
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{outcomes: make(chan outcome), passes: make(chan context.Context, 1)}
}

func (f *fakeRunner) Reconcile(ctx context.Context) (*reconcile.Result, error) {
	f.passes <- ctx
	select {
	case o := <-f.outcomes:
		return o.res, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pass waits for the loop to start a pass and ends it with o.
func (f *fakeRunner) pass(t *testing.T, o outcome) {
	t.Helper()
	select {
	case <-f.passes:
	case <-time.After(deadline):
		t.Fatal("no pass started")
	}
	f.outcomes <- o
}

type failures struct {
	mu  sync.Mutex
	got []string
}

func (f *failures) RecordFailure(_ context.Context, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, err.Error())
	return nil
}

func result(actions ...reconcile.Action) *reconcile.Result {
	res := &reconcile.Result{Revision: "main@sha1:1"}
	for _, a := range actions {
		res.Objects = append(res.Objects, reconcile.ObjectResult{Action: a})
	}
	return res
}

func TestSchedule(t *testing.T) {
	var (
		wrote     = outcome{res: result(reconcile.Created, reconcile.Unchanged)}
		corrected = outcome{res: result(reconcile.Configured)}
		clean     = outcome{res: result(reconcile.Unchanged, reconcile.Unchanged)}
		gitDown   = outcome{err: errors.New("fetching https://example.com/fleet.git: connection refused")}
		failed    = outcome{res: &reconcile.Result{Errors: []string{"Deployment/shop/web: forbidden"}}}
		contested = outcome{res: &reconcile.Result{Objects: []reconcile.ObjectResult{{Action: reconcile.Unchanged}},
			Contested: []reconcile.Contest{{Pointer: "/spec/replicas"}}}}
		pruned = outcome{res: &reconcile.Result{Objects: []reconcile.ObjectResult{{Action: reconcile.Pruned}}, Writes: 1}}
		dryRun = outcome{res: &reconcile.Result{DryRun: true, Objects: []reconcile.ObjectResult{{Action: reconcile.Created}}}}
	)
	const interval = time.Minute
	for _, tt := range []struct {
		name     string
		passes   []outcome
		want     []time.Duration
		failures int
	}{
		{"nothing to correct: the interval", []outcome{clean, clean}, []time.Duration{interval, interval}, 0},
		{"writes back off and a clean pass resets", []outcome{wrote, corrected, wrote, clean, wrote},
			[]time.Duration{2 * time.Second, 6 * time.Second, 18 * time.Second, interval, 2 * time.Second}, 0},
		{"the backoff is capped", []outcome{wrote, wrote, wrote, wrote, wrote, wrote, wrote},
			[]time.Duration{2 * time.Second, 6 * time.Second, 18 * time.Second, 54 * time.Second, 162 * time.Second, 300 * time.Second, 300 * time.Second}, 0},
		{"a pass that could not run is retried with backoff and recorded", []outcome{gitDown, gitDown, clean},
			[]time.Duration{2 * time.Second, 6 * time.Second, interval}, 2},
		{"per-object errors back off", []outcome{failed, failed, clean}, []time.Duration{2 * time.Second, 6 * time.Second, interval}, 0},
		{"writes and failures share one schedule", []outcome{wrote, gitDown, failed, clean},
			[]time.Duration{2 * time.Second, 6 * time.Second, 18 * time.Second, interval}, 1},
		{"contested fields are not a reason to hurry", []outcome{contested}, []time.Duration{interval}, 0},
		{"pruning alone is not a correction to watch", []outcome{pruned}, []time.Duration{interval}, 0},
		{"a dry run corrects nothing", []outcome{dryRun, dryRun}, []time.Duration{interval, interval}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock, runner, fails := newFakeClock(), newFakeRunner(), &failures{}
			loop, err := New(runner, Options{Interval: interval, Backoff: reconcile.DefaultBackoff(), Grace: time.Second, Clock: clock, Failures: fails})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- loop.Start(ctx) }()
			var got []time.Duration
			for _, o := range tt.passes {
				runner.pass(t, o)
				d := clock.wait(t)
				got = append(got, d)
				clock.fire(d)
			}
			if !equalDurations(got, tt.want) {
				t.Errorf("waits %v, want %v", got, tt.want)
			}
			// The last wait ended: the next pass starts. Shutdown gives it
			// the grace period, which ends.
			<-runner.passes
			cancel()
			if d := clock.wait(t); d != time.Second {
				t.Fatalf("grace %s", d)
			}
			clock.fire(time.Second)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Start: %v", err)
				}
			case <-time.After(deadline):
				t.Fatal("the loop did not stop")
			}
			fails.mu.Lock()
			defer fails.mu.Unlock()
			if len(fails.got) != tt.failures {
				t.Errorf("recorded failures %q, want %d", fails.got, tt.failures)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// On shutdown the pass in progress keeps its context for the grace
// period, then it is cancelled with the reason.
func TestShutdownGrace(t *testing.T) {
	for _, tt := range []struct {
		name     string
		finishes bool
	}{
		{"the pass finishes within the grace period", true},
		{"the pass is cancelled when the grace period ends", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock, runner := newFakeClock(), newFakeRunner()
			loop, err := New(runner, Options{Interval: time.Minute, Backoff: reconcile.DefaultBackoff(), Grace: 30 * time.Second, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- loop.Start(ctx) }()
			var pctx context.Context
			select {
			case pctx = <-runner.passes:
			case <-time.After(deadline):
				t.Fatal("no pass")
			}
			cancel()
			if d := clock.wait(t); d != 30*time.Second {
				t.Fatalf("grace wait %s", d)
			}
			if pctx.Err() != nil {
				t.Fatal("the pass was cancelled before its grace period")
			}
			if loop.Ready(nil) == nil {
				t.Error("ready while shutting down")
			}
			if tt.finishes {
				runner.outcomes <- outcome{res: result(reconcile.Configured)}
				defer func() {
					if !strings.Contains(loop.Status(), "last pass at main@sha1:1: synced") {
						t.Errorf("the pass that finished in the grace period was not reported: %q", loop.Status())
					}
				}()
			} else {
				clock.fire(30 * time.Second)
				<-pctx.Done()
				if cause := context.Cause(pctx); cause == nil || !strings.Contains(cause.Error(), "grace period of 30s") {
					t.Errorf("cause %v", cause)
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Start: %v", err)
				}
			case <-time.After(deadline):
				t.Fatal("the loop did not stop")
			}
		})
	}
}

func TestPassTimeout(t *testing.T) {
	clock, runner, fails := newFakeClock(), newFakeRunner(), &failures{}
	loop, err := New(runner, Options{Interval: time.Minute, Backoff: reconcile.DefaultBackoff(), Timeout: 10 * time.Minute, Clock: clock, Failures: fails})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = loop.Start(ctx) }()
	<-runner.passes
	if d := clock.wait(t); d != 10*time.Minute {
		t.Fatalf("timeout wait %s", d)
	}
	clock.fire(10 * time.Minute)
	// The pass returns its context's error; the loop backs off.
	if d := clock.wait(t); d != 2*time.Second {
		t.Fatalf("after a timed out pass the loop waits %s", d)
	}
	fails.mu.Lock()
	defer fails.mu.Unlock()
	if len(fails.got) != 1 || !strings.Contains(fails.got[0], "the pass took longer than 10m0s") {
		t.Errorf("recorded %q", fails.got)
	}
}

func TestReady(t *testing.T) {
	probe := func(loop *Loop) (int, string) {
		rec := httptest.NewRecorder()
		ProbeHandler(loop).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz?verbose=1", nil))
		return rec.Code, rec.Body.String()
	}
	for _, tt := range []struct {
		name    string
		standby bool
	}{{"leader", false}, {"standby", true}} {
		t.Run(tt.name, func(t *testing.T) {
			clock, runner := newFakeClock(), newFakeRunner()
			reg := prometheus.NewRegistry()
			metrics, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			loop, err := New(runner, Options{Interval: time.Minute, Backoff: reconcile.DefaultBackoff(), Clock: clock, Metrics: metrics})
			if err != nil {
				t.Fatal(err)
			}
			loop.standby.Store(tt.standby)
			if code, body := probe(loop); (code == 200) != tt.standby {
				t.Errorf("before the lease: %d %s", code, body)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- loop.Start(ctx) }()
			<-runner.passes
			if code, body := probe(loop); code == 200 {
				t.Errorf("ready during the first pass: %s", body)
			}
			runner.outcomes <- outcome{err: errors.New("git unreachable")}
			clock.wait(t)
			if code, body := probe(loop); code != 200 {
				t.Errorf("not ready after the first pass: %d %s", code, body)
			}
			if got := testutil.ToFloat64(metrics.leader); got != 1 {
				t.Errorf("truce_sync_leader %v", got)
			}
			if got := testutil.ToFloat64(metrics.attempt); got != 1 {
				t.Errorf("truce_sync_backoff_attempt %v", got)
			}
			if !strings.Contains(loop.Status(), "git unreachable") {
				t.Errorf("status %q", loop.Status())
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// The probe withholds reasons, as the manager's does.
			if code, body := probe(loop); code == 200 {
				t.Errorf("ready after shutdown: %s", body)
			}
			if err := loop.Ready(nil); err == nil || err.Error() != "shutting down" {
				t.Errorf("readiness after shutdown: %v", err)
			}
			if got := testutil.ToFloat64(metrics.leader); got != 0 {
				t.Errorf("truce_sync_leader %v after stopping", got)
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{{}, {Interval: time.Minute, Grace: -1}} {
		if _, err := New(newFakeRunner(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestRunStandalone(t *testing.T) {
	clock, runner := newFakeClock(), newFakeRunner()
	loop, err := New(runner, Options{Interval: time.Minute, Backoff: reconcile.DefaultBackoff(), Grace: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), loop, RunOptions{LeaderElection: true}); err == nil || !strings.Contains(err.Error(), "leader election needs a cluster") {
		t.Fatalf("leader election without a cluster: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, loop, RunOptions{HealthAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0"}) }()
	runner.pass(t, outcome{res: result(reconcile.Unchanged)})
	if d := clock.wait(t); d != time.Minute {
		t.Fatalf("wait %s", d)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(deadline):
		t.Fatal("Run did not return")
	}
	if loop.Ready(nil) == nil {
		t.Error("ready after Run returned")
	}
	// A port in use is an error at start, not later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	loop2, _ := New(newFakeRunner(), Options{Interval: time.Minute, Clock: newFakeClock()})
	if err := Run(context.Background(), loop2, RunOptions{HealthAddr: ln.Addr().String()}); err == nil || !strings.Contains(err.Error(), "for /healthz and /readyz") {
		t.Errorf("port in use: %v", err)
	}
}
