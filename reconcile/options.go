package reconcile

import (
	"fmt"
	"slices"
	"time"

	"github.com/truce-dev/truce/drift/ignore"
)

// DefaultFieldManager is the field manager truce applies as.
const DefaultFieldManager = "truce"

// DriftMode says how the stored result of an apply is predicted before
// deciding whether to write.
type DriftMode string

const (
	// DriftServer asks the API server: a server-side apply dry run, which
	// passes mutating admission (policies and webhooks).
	DriftServer DriftMode = "server"
	// DriftOffline predicts with truce's in-process admission chain and the
	// admission configuration it was given (Options.Predictor); it makes no
	// dry-run requests, and cannot see admission it was not given.
	DriftOffline DriftMode = "offline"
)

// Backoff is the self-heal schedule: after a pass that had to correct
// drift, the next pass comes after Initial, then Initial×Factor, … capped
// at Max, until a pass finds nothing to correct. Failed passes are retried
// on the same schedule.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Max     time.Duration
}

// DefaultBackoff is Argo CD's self-heal backoff: 2s, ×3, capped at 5m.
func DefaultBackoff() Backoff {
	return Backoff{Initial: 2 * time.Second, Factor: 3, Max: 300 * time.Second}
}

// Delay returns the wait before retry number attempt (0-based).
func (b Backoff) Delay(attempt int) time.Duration {
	d := float64(b.Initial)
	for i := 0; i < attempt && d < float64(b.Max); i++ {
		d *= b.Factor
	}
	if d > float64(b.Max) {
		return b.Max
	}
	return time.Duration(d)
}

func (b Backoff) validate() error {
	if b.Initial <= 0 || b.Factor < 1 || b.Max < b.Initial {
		return fmt.Errorf("backoff: need initial > 0, factor >= 1 and max >= initial (got %s, %g, %s)", b.Initial, b.Factor, b.Max)
	}
	return nil
}

// LoopOptions configure the loop breaker.
type LoopOptions struct {
	// Threshold is N: a field truce wrote and found changed again N times
	// within Window is Contested; truce has then written it at most N
	// times. Zero turns the loop breaker off.
	Threshold int
	// Window bounds how far back changes count.
	Window time.Duration
	// HumanFieldManagers name the field managers whose writes are people's
	// edits, besides kubectl's (see IsHuman); a name matches the managers
	// that start with it. A person's edit is reverted on every pass and
	// never counted: only automated writers are contested.
	HumanFieldManagers []string
}

// DefaultLoopOptions: three changes within an hour.
func DefaultLoopOptions() LoopOptions { return LoopOptions{Threshold: 3, Window: time.Hour} }

// Options configure a Reconciler.
type Options struct {
	// Name and Namespace identify the sync (the GitSync object); they are
	// part of every tracking id, so two syncs never prune each other's
	// objects.
	Name, Namespace string
	// FieldManager defaults to DefaultFieldManager.
	FieldManager string
	// Force takes over fields other managers own instead of failing with a
	// conflict (server-side apply force). Flux always forces; truce
	// defaults to forcing too, and reports conflicts when it is off.
	Force bool
	// Prune deletes objects truce applied that left Git.
	Prune bool
	// DryRun computes everything and writes nothing (no apply, no delete,
	// no status): a rehearsal.
	DryRun bool
	// Drift selects the prediction used for drift detection.
	Drift DriftMode
	// Rules are the ignore rules, Flux (spec.ignore) or Argo CD
	// (ignoreDifferences) style.
	Rules []ignore.Rule
	Loop  LoopOptions
	// Backoff is the self-heal schedule used by Controller.
	Backoff Backoff
	// WaitTimeout bounds the wait for CRDs and Namespaces to be
	// established before the objects that need them are applied.
	WaitTimeout time.Duration
	// Concurrency bounds the objects diffed and applied at once.
	Concurrency int
}

// DefaultOptions returns the defaults: field manager truce, force, no
// prune, server dry-run drift detection, loop breaker at 3 changes in an
// hour, self-heal backoff 2s ×3 capped at 5m, 2 minutes for CRDs and
// Namespaces, 4 objects at once.
func DefaultOptions() Options {
	return Options{
		Name:         "truce",
		Namespace:    "truce-system",
		FieldManager: DefaultFieldManager,
		Force:        true,
		Drift:        DriftServer,
		Loop:         DefaultLoopOptions(),
		Backoff:      DefaultBackoff(),
		WaitTimeout:  2 * time.Minute,
		Concurrency:  4,
	}
}

func (o Options) validate() error {
	if o.Name == "" || o.Namespace == "" {
		return fmt.Errorf("a sync needs a name and a namespace")
	}
	if o.FieldManager == "" {
		return fmt.Errorf("a sync needs a field manager")
	}
	switch o.Drift {
	case DriftServer, DriftOffline:
	default:
		return fmt.Errorf("drift mode %q: want %q or %q", o.Drift, DriftServer, DriftOffline)
	}
	if o.Loop.Threshold < 0 || (o.Loop.Threshold > 0 && o.Loop.Window <= 0) {
		return fmt.Errorf("loop breaker: threshold must be >= 0 and the window positive")
	}
	if slices.Contains(o.Loop.HumanFieldManagers, "") {
		return fmt.Errorf("human field managers: an empty name would match every field manager")
	}
	if o.Concurrency < 1 {
		return fmt.Errorf("concurrency must be at least 1")
	}
	return o.Backoff.validate()
}
