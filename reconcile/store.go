package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/truce-dev/truce/cluster"
)

// State is what a sync remembers between passes and across restarts.
type State struct {
	// Inventory lists the objects the last successful pass applied, in
	// apply order: prune candidates are the ones that left Git.
	Inventory []cluster.Ref `json:"inventory,omitempty"`
	// Contested are the fields truce does not write until Git or the
	// admission configuration changes.
	Contested []Contest `json:"contested,omitempty"`
}

// Status is what a pass reports to users (the GitSync status).
type Status struct {
	Source string
	// Revision is the revision of the last pass; AppliedRevision the one
	// whose pass ended without errors.
	Revision, AppliedRevision string
	LastSync                  time.Time
	Applied, Unchanged        int
	Pruned, Failed            int
	Contested                 []Contest
	// Reverted are the people's edits the pass wrote back.
	Reverted []ManualEdit
	Errors   []string
	State    State
}

// Store keeps a sync's State and publishes its Status. Load returns an
// empty State when nothing was saved yet.
type Store interface {
	Load(ctx context.Context) (*State, error)
	Save(ctx context.Context, st *Status) error
	// SaveInventory records the inventory alone, keeping the rest: a pass
	// calls it before its first write when it may create objects, so that
	// a process killed mid-pass still knows them and prunes them once they
	// leave Git.
	SaveInventory(ctx context.Context, inventory []cluster.Ref) error
}

// MemoryStore keeps the state in the process (rehearsals, one-shot runs
// that do not prune, tests).
type MemoryStore struct {
	mu   sync.Mutex
	last *Status
}

// Load implements Store.
func (m *MemoryStore) Load(context.Context) (*State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return &State{}, nil
	}
	st := m.last.State
	st.Inventory = append([]cluster.Ref(nil), st.Inventory...)
	st.Contested = append([]Contest(nil), st.Contested...)
	return &st, nil
}

// Save implements Store.
func (m *MemoryStore) Save(_ context.Context, st *Status) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *st
	m.last = &c
	return nil
}

// SaveInventory implements Store.
func (m *MemoryStore) SaveInventory(_ context.Context, inventory []cluster.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := Status{}
	if m.last != nil {
		c = *m.last
	}
	c.State.Inventory = append([]cluster.Ref(nil), inventory...)
	m.last = &c
	return nil
}

// Last returns the last saved status, nil before the first.
func (m *MemoryStore) Last() *Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Recorder receives what users should see as Kubernetes Events.
type Recorder interface {
	// Event is about the object ref; kind is "Normal" or "Warning".
	Event(ref cluster.Ref, kind, reason, message string)
}

// Metrics receives counts; see NewMetrics for the Prometheus one.
type Metrics interface {
	Pass(result *Result, err error)
	Contested(c Contest)
	// Reverted counts a person's edit written back.
	Reverted(e ManualEdit)
}

type nopRecorder struct{}

func (nopRecorder) Event(cluster.Ref, string, string, string) {}

type nopMetrics struct{}

func (nopMetrics) Pass(*Result, error) {}
func (nopMetrics) Contested(Contest)   {}
func (nopMetrics) Reverted(ManualEdit) {}
