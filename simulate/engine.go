package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
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
	// OnRound, when set, is told after each reconciliation which member
	// (its index in RunWorld's members) has now reconciled how often, for
	// progress on long runs.
	OnRound func(member, rounds int)
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
	res, err := RunWorld(ctx, c, []Member{{Tool: tool, Desired: desired}}, writers, opts)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Member is one unit of a world: the tool instance that reconciles it and
// the manifests it applies.
type Member struct {
	Tool    Tool
	Desired []Desired
	// Label names the unit in the other members' results ("Application
	// guestbook"), whose writes they see as another writer's.
	Label string
}

// RunWorld simulates the members and writers together on c, as one
// cluster holds everything the units of one entry point apply: each member
// starts in the order given (Flux dependsOn, an app of apps before its
// Applications) and runs on its own schedule, and each sees the others'
// writes as those of another writer. It returns a result per member, in
// order. c is changed: pass a fresh cluster per run.
func RunWorld(ctx context.Context, c cluster.Cluster, members []Member, writers []Writer, opts Options) ([]*Result, error) {
	opts = opts.withDefaults()
	rec := newRecorder(c)
	q := &queue{}
	results := make([]*Result, len(members))
	simulated := make([]time.Duration, len(members))
	// done members reached MaxRounds; dirty ones have not reconciled since
	// the cluster last changed.
	done, dirty := make([]bool, len(members)), make([]bool, len(members))
	for i, m := range members {
		results[i] = &Result{Tool: m.Tool.Name(), Settings: m.Tool.Settings(), Window: opts.Window}
		simulated[i] = opts.Window
		dirty[i] = true
		q.schedule(event{at: 0, kind: reconcileEvent, member: i, trigger: "initial sync"})
	}
	for i, w := range writers {
		if p, ok := w.(periodic); ok && p.Period() > 0 {
			q.schedule(event{at: p.Period() + w.Delay(), kind: writerEvent, writer: i, periodic: true})
		}
		if s, ok := w.(scheduled); ok {
			if at, ok := s.Next(0); ok {
				q.schedule(event{at: at, kind: writerEvent, writer: i, periodic: true})
			}
		}
	}
	refs := make([]map[cluster.Ref]bool, len(members))
	for i, m := range members {
		refs[i] = map[cluster.Ref]bool{}
		for _, d := range m.Desired {
			refs[i][cluster.RefOf(d.Object)] = true
		}
	}
	settled := func() bool {
		for i := range members {
			if dirty[i] && !done[i] {
				return false
			}
		}
		return true
	}
	for q.Len() > 0 {
		ev := heap.Pop(q).(event)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("simulating %s: %w", members[max(ev.member, 0)].Tool.Name(), err)
		}
		if ev.at > opts.Window {
			break
		}
		rec.now = ev.at
		switch ev.kind {
		case reconcileEvent:
			m, res := members[ev.member], results[ev.member]
			if len(res.Rounds) >= opts.MaxRounds {
				simulated[ev.member], done[ev.member] = ev.at, true
				if slices.Index(done, false) < 0 {
					q.clear()
				}
				continue
			}
			var round *Round
			err := rec.as(m.Tool.Manager(), ev.member, func() error {
				var err error
				round, err = m.Tool.Reconcile(ctx, rec, ev.trigger)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s at %s (%s): %w", m.Tool.Name(), ev.at, ev.trigger, err)
			}
			round.At = ev.at
			res.Rounds = append(res.Rounds, *round)
			if opts.OnRound != nil {
				opts.OnRound(ev.member, len(res.Rounds))
			}
			dirty[ev.member] = false
			if err := scheduleTool(ctx, q, ev.member, m.Tool, rec, ev.at, true); err != nil {
				return nil, err
			}
		case writerEvent:
			w := writers[ev.writer]
			if err := rec.as(w.Name(), -1, func() error { return w.Act(ctx, rec) }); err != nil {
				return nil, fmt.Errorf("%s at %s: %w", w.Describe(), ev.at, err)
			}
			if p, ok := w.(periodic); ok && p.Period() > 0 {
				q.schedule(event{at: ev.at + p.Period(), kind: writerEvent, writer: ev.writer, periodic: true})
			}
			if s, ok := w.(scheduled); ok {
				if at, ok := s.Next(ev.at); ok {
					q.schedule(event{at: at, kind: writerEvent, writer: ev.writer, periodic: true})
				}
			}
		}
		changed := rec.takeChanged()
		if len(changed) == 0 {
			if ev.kind == reconcileEvent && q.onlyPeriodic() && settled() {
				// Nothing moves any more: every later round finds what
				// each member's last one found.
				break
			}
			continue
		}
		for i := range dirty {
			dirty[i] = true
		}
		for i, w := range writers {
			for _, ref := range changed {
				if w.Watches(ref) {
					q.schedule(event{at: ev.at + w.Delay(), kind: writerEvent, writer: i})
					break
				}
			}
		}
		// The others see the change to objects they apply (a tool watches
		// its own objects), and any change of a writer that creates
		// objects (a copy may carry a tool's tracking).
		creates := false
		if ev.kind == writerEvent {
			_, creates = writers[ev.writer].(creator)
		}
		for i, m := range members {
			if done[i] || (ev.kind == reconcileEvent && ev.member == i) || (!creates && !touches(refs[i], changed)) {
				continue
			}
			if err := scheduleTool(ctx, q, i, m.Tool, rec, ev.at, false); err != nil {
				return nil, err
			}
		}
	}
	for i, m := range members {
		res := results[i]
		res.Simulated = simulated[i]
		var own map[cluster.Ref]bool
		if len(members) > 1 {
			own = refs[i]
		}
		res.Writes = rec.view(i, members, res, own)
		if err := classify(ctx, rec, m.Tool, m.Desired, res); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// touches reports whether changed holds one of refs.
func touches(refs map[cluster.Ref]bool, changed []cluster.Ref) bool {
	for _, ref := range changed {
		if refs[ref] {
			return true
		}
	}
	return false
}

func scheduleTool(ctx context.Context, q *queue, member int, tool Tool, c cluster.Cluster, now time.Duration, own bool) error {
	at, trigger, ok, err := tool.Next(ctx, c, now, own)
	if err != nil {
		return fmt.Errorf("%s: deciding when to reconcile next: %w", tool.Name(), err)
	}
	if ok {
		q.schedule(event{at: at, kind: reconcileEvent, member: member, trigger: trigger, periodic: trigger == triggerInterval})
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
	member  int
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
		if p.kind == e.kind && ((e.kind == reconcileEvent && p.member == e.member) || (e.kind == writerEvent && p.writer == e.writer)) {
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

// onlyPeriodic reports whether all that is left are the tools' own
// periodic reconciliations.
func (q *queue) onlyPeriodic() bool {
	for _, e := range q.events {
		if e.kind != reconcileEvent || !e.periodic {
			return false
		}
	}
	return true
}
