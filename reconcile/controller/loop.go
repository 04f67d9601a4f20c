// Package controller runs a reconcile.Reconciler for good: a pass every
// interval, sooner after a pass that had to correct drift or failed
// (self-heal backoff), under a controller-runtime manager that provides
// leader election, health probes and graceful shutdown. The loop is one
// manager.Runnable; Run wires it up.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/truce-dev/truce/reconcile"
)

// Runner runs one pass; *reconcile.Reconciler is one. Passes never overlap.
type Runner interface {
	Reconcile(ctx context.Context) (*reconcile.Result, error)
}

// FailureRecorder shows a pass that could not run where users look (the
// GitSync status: gitsync.Store is one). The reconciler saves the status
// of every pass that ran; a pass that stopped early saves nothing.
type FailureRecorder interface {
	RecordFailure(ctx context.Context, err error) error
}

// Clock tells time and waits; tests replace it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Loop.
type Options struct {
	// Interval is the time between passes that found nothing to correct.
	Interval time.Duration
	// Backoff is the self-heal schedule (reconcile.Options.Backoff).
	Backoff reconcile.Backoff
	// Timeout bounds one pass; zero means no bound.
	Timeout time.Duration
	// Grace is how long the pass in progress may still run once shutdown
	// begins; then its context is cancelled.
	Grace time.Duration
	// Failures, when set, records passes that could not run.
	Failures FailureRecorder
	// Metrics, when set, exports the schedule.
	Metrics *Metrics
	Logger  *slog.Logger
	// Clock defaults to the real one.
	Clock Clock
}

// Loop runs passes on the schedule. It is a manager.Runnable that needs
// leader election: only one replica runs passes.
type Loop struct {
	runner Runner
	opts   Options
	clock  Clock
	log    *slog.Logger

	// standby makes a replica that waits for the lease ready.
	standby  atomic.Bool
	started  atomic.Bool
	stopping atomic.Bool
	passes   atomic.Int64

	mu   sync.Mutex
	last string // the last pass's outcome, for /readyz
}

// New returns a loop running r with opts.
func New(r Runner, opts Options) (*Loop, error) {
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("the interval must be positive, got %s", opts.Interval)
	}
	if opts.Grace < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("the grace period and the timeout must not be negative")
	}
	l := &Loop{runner: r, opts: opts, clock: opts.Clock, log: opts.Logger}
	if l.clock == nil {
		l.clock = realClock{}
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (l *Loop) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends, then returns nil once the pass in
// progress has finished or its grace period has passed. A pass that fails
// is retried on the backoff schedule; Start never returns its error.
func (l *Loop) Start(ctx context.Context) error {
	l.started.Store(true)
	stop := context.AfterFunc(ctx, func() { l.stopping.Store(true) })
	defer stop()
	// AfterFunc runs in a goroutine of its own: once Start returns, the
	// loop is stopping whether or not it ran yet.
	defer l.stopping.Store(true)
	if m := l.opts.Metrics; m != nil {
		m.leader.Set(1)
		defer m.leader.Set(0)
	}
	sched := schedule{interval: l.opts.Interval, backoff: l.opts.Backoff}
	for {
		res, err := l.pass(ctx)
		if res == nil && err == nil {
			err = errors.New("the pass returned no result")
		}
		if ctx.Err() != nil {
			// A pass that finished within the grace period is reported; one
			// that was cut short is not a failure to show.
			if err == nil {
				l.report(ctx, res, nil, 0, 0)
			}
			l.log.Info("stopped", "reason", context.Cause(ctx).Error())
			return nil
		}
		delay, attempt := sched.next(res, err)
		l.report(ctx, res, err, delay, attempt)
		select {
		case <-ctx.Done():
			l.log.Info("stopped", "reason", context.Cause(ctx).Error())
			return nil
		case <-l.clock.After(delay):
		}
	}
}

// pass runs one pass with its own context: it outlives ctx by the grace
// period, so that shutdown lets the pass finish its writes and its status.
func (l *Loop) pass(ctx context.Context) (*reconcile.Result, error) {
	pctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	go l.watch(ctx, pctx, cancel)
	res, err := l.runner.Reconcile(pctx)
	if err != nil && context.Cause(pctx) != nil && !errors.Is(err, context.Cause(pctx)) {
		err = fmt.Errorf("%w (%w)", err, context.Cause(pctx))
	}
	return res, err
}

// watch cancels the pass when it takes longer than the timeout, or when
// shutdown began and the grace period passed.
func (l *Loop) watch(ctx, pctx context.Context, cancel context.CancelCauseFunc) {
	var timeout <-chan time.Time
	if l.opts.Timeout > 0 {
		timeout = l.clock.After(l.opts.Timeout)
	}
	select {
	case <-pctx.Done():
		return
	case <-timeout:
		cancel(fmt.Errorf("the pass took longer than %s", l.opts.Timeout))
		return
	case <-ctx.Done():
	}
	if pctx.Err() != nil {
		// Both were done when select chose: the pass has ended already.
		return
	}
	l.log.Info("shutting down: finishing the pass in progress", "grace", l.opts.Grace)
	select {
	case <-pctx.Done():
	case <-l.clock.After(l.opts.Grace):
		cancel(fmt.Errorf("shutting down: the pass did not finish within the grace period of %s", l.opts.Grace))
	}
}

// report logs the pass, records a failure and updates the metrics; delay
// is the wait before the next pass, zero when the loop is stopping.
func (l *Loop) report(ctx context.Context, res *reconcile.Result, err error, delay time.Duration, attempt int) {
	now := l.clock.Now()
	l.passes.Add(1)
	if m := l.opts.Metrics; m != nil {
		m.lastPass.Set(float64(now.UnixNano()) / 1e9)
		if delay > 0 {
			m.nextPass.Set(float64(now.Add(delay).UnixNano()) / 1e9)
			m.attempt.Set(float64(attempt))
		}
	}
	if err != nil {
		l.setLast("the last pass could not run: " + err.Error())
		l.log.Error("pass failed", "error", err.Error(), "retryIn", delay.String(), "attempt", attempt)
		if l.opts.Failures != nil {
			if rerr := l.opts.Failures.RecordFailure(ctx, err); rerr != nil {
				l.log.Error("recording the failed pass", "error", rerr.Error())
			}
		}
		return
	}
	l.setLast(fmt.Sprintf("last pass at %s: %s", res.Revision, verdict(res)))
	l.log.Info("pass", "revision", res.Revision, "outcome", verdict(res),
		"created", res.Count(reconcile.Created), "configured", res.Count(reconcile.Configured),
		"unchanged", res.Count(reconcile.Unchanged), "pruned", len(res.Pruned), "skipped", res.Count(reconcile.Skipped),
		"failed", res.Count(reconcile.Failed), "contested", len(res.Contested), "reverted", len(res.Reverted), "writes", res.Writes,
		"duration", res.Duration.String(), "next", next(delay), "attempt", attempt)
	logObjects(l.log, res.Objects)
	for _, e := range res.Reverted {
		l.log.Warn("edited outside Git", "ref", e.Ref.String(), "field", e.Pointer, "manager", e.Writer.Manager,
			"operation", e.Writer.Operation, "reverted", !res.DryRun)
	}
	for _, c := range res.Contested {
		l.log.Warn("contested", "ref", c.Ref.String(), "field", c.Pointer, "writer", c.Writer.String(),
			"changes", c.Changes, "fix", c.Fix.Kind, "fixDescription", c.Fix.Description)
	}
	for _, e := range res.Errors {
		l.log.Warn("pass error", "error", e)
	}
}

// next describes the wait before the next pass; zero when stopping.
func next(delay time.Duration) string {
	if delay == 0 {
		return "none: stopping"
	}
	return delay.String()
}

func verdict(res *reconcile.Result) string {
	switch {
	case len(res.Errors) > 0:
		return "failed"
	case len(res.Contested) > 0:
		return "contested"
	}
	return "synced"
}

func (l *Loop) setLast(s string) {
	l.mu.Lock()
	l.last = s
	l.mu.Unlock()
}

// Ready is the /readyz check: it fails until the first pass finished and
// once shutdown began. A replica waiting for the lease is ready: it is a
// healthy standby, and a rollout must be able to count it.
func (l *Loop) Ready(*http.Request) error {
	switch {
	case l.stopping.Load():
		return errors.New("shutting down")
	case l.passes.Load() > 0:
		return nil
	case !l.started.Load() && l.standby.Load():
		return nil
	case !l.started.Load():
		return errors.New("not started")
	}
	return errors.New("the first pass has not finished")
}

// Status describes the loop for logs and probes.
func (l *Loop) Status() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.last != "":
		return l.last
	case l.started.Load():
		return "the first pass is running"
	}
	return "waiting for the lease"
}

// schedule decides when the next pass runs: after a pass that wrote
// (created or configured objects) or failed, the next comes after
// Backoff.Delay(attempt) and attempt grows; a pass with no writes and no
// errors resets the schedule to the interval.
type schedule struct {
	interval time.Duration
	backoff  reconcile.Backoff
	attempt  int
}

// next returns the wait before the next pass and the attempt it is.
func (s *schedule) next(res *reconcile.Result, err error) (time.Duration, int) {
	if !needsHeal(res, err) {
		s.attempt = 0
		return s.interval, 0
	}
	d := s.backoff.Delay(s.attempt)
	s.attempt++
	return d, s.attempt
}

// needsHeal reports a pass after which truce looks again soon: it failed,
// or it corrected drift (has the correction held, or does someone change
// it back?). A dry run writes nothing and corrects nothing.
func needsHeal(res *reconcile.Result, err error) bool {
	if err != nil || res == nil || len(res.Errors) > 0 {
		return true
	}
	return !res.DryRun && res.Count(reconcile.Created)+res.Count(reconcile.Configured) > 0
}

// logObjects logs what a pass did to each object. An object's error is at
// debug level: the pass's errors, stated once per cause with their count
// (reconcile's Result.Errors), are the warnings, so that with the API
// server down one line says why instead of one per object.
func logObjects(log *slog.Logger, objs []reconcile.ObjectResult) {
	for _, o := range objs {
		if o.Action == reconcile.Unchanged && len(o.Ignored) == 0 {
			continue
		}
		attrs := []any{"ref", o.Ref.String(), "action", string(o.Action)}
		if o.Source != "" {
			attrs = append(attrs, "source", o.Source)
		}
		if len(o.Drifted) > 0 {
			attrs = append(attrs, "drifted", o.Drifted)
		}
		if len(o.Ignored) > 0 {
			ignored := make([]string, len(o.Ignored))
			for i, ig := range o.Ignored {
				ignored[i] = ig.Pointer + " (" + ig.Treatment + ")"
			}
			attrs = append(attrs, "ignored", ignored)
		}
		if o.Note != "" {
			attrs = append(attrs, "note", o.Note)
		}
		if o.Error != "" {
			log.Debug("object", append(attrs, "error", o.Error)...)
			continue
		}
		log.Info("object", attrs...)
	}
}
