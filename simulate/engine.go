package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/manifest"
)

// Desired is one manifest from Git and where it came from.
type Desired struct {
	Object *unstructured.Unstructured
	Source manifest.Source
}

// Tool is a GitOps tool's reconciler: how it compares, applies, prunes and
// schedules itself. It sees the cluster only through the cluster.Cluster it
// is handed, so every write it makes is logged.
type Tool interface {
	// Name is "argocd" or "flux"; Manager is the field manager it writes as.
	Name() string
	Manager() string
	// Settings describes the behaviour in one line, for reports.
	Settings() string
	// Reconcile runs one reconciliation: compare Git with the cluster,
	// apply what the tool applies, prune what it prunes.
	Reconcile(ctx context.Context, c cluster.Cluster, trigger string) (*Round, error)
	// Next says when the tool reconciles again on its own, at now; it is
	// called after each of its rounds (own) and after others changed
	// objects it may watch (!own). ok is false when it waits.
	Next(ctx context.Context, c cluster.Cluster, now time.Duration, own bool) (at time.Duration, trigger string, ok bool, err error)
	// Compare is the tool's current comparison of every object of Git.
	Compare(ctx context.Context, c cluster.Cluster) (map[cluster.Ref]*drift.Object, error)
	// Owned lists live objects the tool considers part of its application
	// that are not in Git (its prune candidates).
	Owned(ctx context.Context, c cluster.Cluster) ([]cluster.Ref, error)
}

// Writer is another controller writing to the cluster.
type Writer interface {
	// Name is its field manager; Describe says what it does.
	Name() string
	Describe() string
	// Watches reports whether a change of ref wakes it up.
	Watches(ref cluster.Ref) bool
	// Delay is how long after a change it writes.
	Delay() time.Duration
	// Act reads the cluster and writes what the controller wants.
	Act(ctx context.Context, c cluster.Cluster) error
}

// periodic writers also act on their own schedule (a background scan, a
// trigger that fires regularly): every Period, Delay after the trigger.
type periodic interface {
	Period() time.Duration
}

// creator writers create objects of kinds that may not be in Git.
type creator interface {
	Creates() []schema.GroupVersionKind
}

// Options bound a run.
type Options struct {
	// Window is the stretch of time the verdicts and write counts cover;
	// default one hour.
	Window time.Duration
	// MaxRounds bounds the tool's reconciliations that are simulated write
	// by write; later ones are extrapolated from the cycle. Default 16.
	MaxRounds int
}

// DefaultOptions: one hour, 16 rounds.
func DefaultOptions() Options { return Options{Window: time.Hour, MaxRounds: 16} }

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Window <= 0 {
		o.Window = d.Window
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = d.MaxRounds
	}
	return o
}

// Run simulates tool and writers on c for opts.Window and returns a verdict
// per object. c is changed: pass a fresh cluster per run.
func Run(ctx context.Context, c cluster.Cluster, tool Tool, writers []Writer, desired []Desired, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	rec := newRecorder(c)
	res := &Result{Tool: tool.Name(), Settings: tool.Settings(), Window: opts.Window}
	q := &queue{}
	q.schedule(event{at: 0, kind: reconcileEvent, trigger: "initial sync"})
	for i, w := range writers {
		if p, ok := w.(periodic); ok && p.Period() > 0 {
			q.schedule(event{at: p.Period() + w.Delay(), kind: writerEvent, writer: i, periodic: true})
		}
	}
	simulated := opts.Window
	for q.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("simulating %s: %w", tool.Name(), err)
		}
		ev := heap.Pop(q).(event)
		if ev.at > opts.Window {
			break
		}
		rec.now = ev.at
		switch ev.kind {
		case reconcileEvent:
			if len(res.Rounds) >= opts.MaxRounds {
				simulated = ev.at
				q.clear()
				continue
			}
			var round *Round
			err := rec.as(tool.Manager(), true, func() error {
				var err error
				round, err = tool.Reconcile(ctx, rec, ev.trigger)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s at %s (%s): %w", tool.Name(), ev.at, ev.trigger, err)
			}
			round.At = ev.at
			res.Rounds = append(res.Rounds, *round)
			if err := scheduleTool(ctx, q, tool, rec, ev.at, true); err != nil {
				return nil, err
			}
		case writerEvent:
			w := writers[ev.writer]
			if err := rec.as(w.Name(), false, func() error { return w.Act(ctx, rec) }); err != nil {
				return nil, fmt.Errorf("%s at %s: %w", w.Describe(), ev.at, err)
			}
			if p, ok := w.(periodic); ok && p.Period() > 0 {
				q.schedule(event{at: ev.at + p.Period(), kind: writerEvent, writer: ev.writer, periodic: true})
			}
		}
		changed := rec.takeChanged()
		if len(changed) == 0 {
			if ev.kind == reconcileEvent && q.onlyPeriodic() {
				// Nothing moves any more: every later round finds what this
				// one found.
				break
			}
			continue
		}
		for i, w := range writers {
			for _, ref := range changed {
				if w.Watches(ref) {
					q.schedule(event{at: ev.at + w.Delay(), kind: writerEvent, writer: i})
					break
				}
			}
		}
		if ev.kind == writerEvent {
			if err := scheduleTool(ctx, q, tool, rec, ev.at, false); err != nil {
				return nil, err
			}
		}
	}
	res.Simulated = simulated
	res.Writes = rec.writes
	if err := classify(ctx, rec, tool, desired, res); err != nil {
		return nil, err
	}
	return res, nil
}

func scheduleTool(ctx context.Context, q *queue, tool Tool, c cluster.Cluster, now time.Duration, own bool) error {
	at, trigger, ok, err := tool.Next(ctx, c, now, own)
	if err != nil {
		return fmt.Errorf("%s: deciding when to reconcile next: %w", tool.Name(), err)
	}
	if ok {
		q.schedule(event{at: at, kind: reconcileEvent, trigger: trigger, periodic: trigger == triggerInterval})
	}
	return nil
}

const triggerInterval = "interval"

type eventKind int

const (
	reconcileEvent eventKind = iota
	writerEvent
)

type event struct {
	at      time.Duration
	seq     int
	kind    eventKind
	writer  int
	trigger string
	// periodic events happen whatever the cluster does.
	periodic bool
}

// queue orders events by time, then by when they were scheduled. An actor
// has at most one pending event: scheduling it again keeps the earlier.
type queue struct {
	events []event
	seq    int
}

func (q *queue) Len() int { return len(q.events) }
func (q *queue) Less(i, j int) bool {
	if q.events[i].at != q.events[j].at {
		return q.events[i].at < q.events[j].at
	}
	return q.events[i].seq < q.events[j].seq
}
func (q *queue) Swap(i, j int) { q.events[i], q.events[j] = q.events[j], q.events[i] }
func (q *queue) Push(x any)    { q.events = append(q.events, x.(event)) }
func (q *queue) Pop() any {
	e := q.events[len(q.events)-1]
	q.events = q.events[:len(q.events)-1]
	return e
}

func (q *queue) schedule(e event) {
	for i, p := range q.events {
		if p.kind == e.kind && (e.kind == reconcileEvent || p.writer == e.writer) {
			if p.at <= e.at {
				return
			}
			q.events[i].at, q.events[i].trigger, q.events[i].periodic = e.at, e.trigger, e.periodic
			heap.Fix(q, i)
			return
		}
	}
	q.seq++
	e.seq = q.seq
	heap.Push(q, e)
}

func (q *queue) clear() { q.events = nil }

// onlyPeriodic reports whether all that is left are the tool's own
// periodic reconciliations.
func (q *queue) onlyPeriodic() bool {
	for _, e := range q.events {
		if e.kind != reconcileEvent || !e.periodic {
			return false
		}
	}
	return true
}
