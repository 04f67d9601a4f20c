package admission

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A chain remembers the results of the writes it admitted, keyed by what
// the result is a function of, so that a write admitted again against the
// same state is answered without running admission again: the simulation
// writes the same object round after round (self-heal), and a dry run is
// followed by the same write for real (truce diff, Flux).
//
// What an admission reads: the request, the stored object it replaces,
// what the chain compiled from the state (policies, bindings, webhook
// configurations, CRDs, params: a write of those builds a new chain, with
// a new memo), and what the plugins read through their informers and
// clients (namespaces, ServiceAccounts, RBAC, anything an informer
// holds). The key is a digest of the request and of the stored object;
// every commit of an object some plugin can read, and every delete, starts
// a new epoch, which is part of the key too.
//
// The memo is off where admission has inputs outside the state: webhooks
// (a server answers as it likes, and may count calls), ResourceQuota
// (admission writes the quota's usage), admission plugins the server does
// not enable by default (EventRateLimit counts, NamespaceAutoProvision
// creates namespaces, ImagePolicyWebhook calls out). Writes of Services
// are never remembered: their addresses are allocated from the chain's
// allocator, whose state moves with every Service stored.
//
// A dry run and the same write for real differ only where something reads
// dryRun: webhooks (memo off), ResourceQuota (off), the Service allocator
// (not remembered) and policies' CEL (request.dryRun, request.options).
// When no policy or binding of the state mentions either, the key leaves
// dryRun out, and the write for real is answered with its dry run's
// result.
//
// A remembered result carries the uid, creationTimestamp and
// managedFields times of the admission that computed it: the server
// generates those afresh on every write, so no client can tell them from
// fresh ones.

// memoMode says what a chain may remember.
type memoMode int

const (
	memoOff memoMode = iota
	// memoOn remembers results keyed with dryRun.
	memoOn
	// memoDryRunBlind remembers results keyed without dryRun.
	memoDryRunBlind
)

// memoCapacity bounds the remembered results of one chain; past it, the
// oldest are forgotten.
const memoCapacity = 4096

type memoKey [sha256.Size]byte

type memo struct {
	mode memoMode

	mu      sync.Mutex
	epoch   uint64
	entries map[memoKey]*Result
	// order is a ring of the keys in entries, oldest at next.
	order []memoKey
	next  int
	hits  int
}

// defaultOnlyPlugins reports whether names are all plugins the server
// enables by default: the other plugins are not memoised.
func defaultOnlyPlugins(names []string) bool {
	defaults := sets.New(DefaultPlugins()...)
	for _, n := range names {
		if !defaults.Has(n) {
			return false
		}
	}
	return true
}

// newMemo decides what a chain built from state with the plugins names
// (and opts) may remember.
func newMemo(state *State, names []string, opts Options) *memo {
	m := &memo{entries: map[memoKey]*Result{}}
	if opts.NoMemo || !defaultOnlyPlugins(names) {
		return m
	}
	blind := true
	for _, o := range state.Objects() {
		switch o.GroupVersionKind().GroupKind() {
		case k8sschema.GroupKind{Kind: "ResourceQuota"}:
			return m
		case k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
			k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:
			if hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks"); len(hooks) > 0 {
				return m
			}
		}
		if isPolicyKind(o.GetKind()) && o.GroupVersionKind().Group == "admissionregistration.k8s.io" && mentionsDryRun(o.Object) {
			blind = false
		}
	}
	m.mode = memoOn
	if blind {
		m.mode = memoDryRunBlind
	}
	return m
}

// mentionsDryRun reports whether any string of v (a policy's expressions
// among them) names dryRun or the request's options, where CEL reads
// whether the request is a dry run.
func mentionsDryRun(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if mentionsDryRun(k) || mentionsDryRun(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if mentionsDryRun(x) {
				return true
			}
		}
	case string:
		return strings.Contains(v, "dryRun") || strings.Contains(v, "options")
	}
	return false
}

// advance starts a new epoch: a commit or delete changed what admission
// may read besides the stored object a write replaces.
func (m *memo) advance() {
	m.mu.Lock()
	m.epoch++
	m.mu.Unlock()
}

// key is the digest a result of req is remembered by, with existing the
// stored object it replaces (nil for a create); ok is false for a write
// not to be remembered.
func (m *memo) key(req Request, gk k8sschema.GroupKind, existing *unstructured.Unstructured) (k memoKey, ok bool) {
	if m.mode == memoOff || gk == serviceKind || req.Object == nil {
		return k, false
	}
	if req.Object.GetName() == "" {
		// A generated name is random: each write gets its own.
		return k, false
	}
	m.mu.Lock()
	epoch := m.epoch
	m.mu.Unlock()
	h := sha256.New()
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], epoch)
	h.Write(buf[:])
	writeString(h, req.User)
	binary.BigEndian.PutUint64(buf[:], uint64(len(req.Groups)))
	h.Write(buf[:])
	for _, g := range req.Groups {
		writeString(h, g)
	}
	writeString(h, req.FieldManager)
	// A patch is applied to the stored object before admission: two
	// patches of one object are two different writes.
	writeString(h, string(req.PatchType))
	writeString(h, string(req.Patch))
	flags := []bool{req.Apply, req.Force, m.mode != memoDryRunBlind && req.Persist}
	for _, f := range flags {
		writeBool(h, f)
	}
	hashValue(h, req.Object.Object)
	if existing == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		hashValue(h, existing.Object)
	}
	h.Sum(k[:0])
	return k, true
}

// get returns a copy of the result remembered by k, with source as its
// Source.
func (m *memo) get(k memoKey, source string) (*Result, bool) {
	m.mu.Lock()
	r, ok := m.entries[k]
	if ok {
		m.hits++
	}
	m.mu.Unlock()
	if !ok {
		return nil, false
	}
	out := copyResult(r)
	out.Source = source
	return out, true
}

// put remembers a copy of r by k.
func (m *memo) put(k memoKey, r *Result) {
	c := copyResult(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[k]; ok {
		return
	}
	if len(m.order) < memoCapacity {
		m.order = append(m.order, k)
	} else {
		delete(m.entries, m.order[m.next])
		m.order[m.next] = k
		m.next = (m.next + 1) % memoCapacity
	}
	m.entries[k] = c
}

// copyResult is a deep copy of r: callers own what Admit returns and
// change it (the cluster sets the resourceVersion, commits the object).
func copyResult(r *Result) *Result {
	out := *r
	if r.Object != nil {
		out.Object = runtime.DeepCopyJSON(r.Object)
	}
	if r.Details != nil {
		out.Details = r.Details.DeepCopy()
	}
	out.Warnings = slices.Clone(r.Warnings)
	if r.AuditAnnotations != nil {
		out.AuditAnnotations = make(map[string]string, len(r.AuditAnnotations))
		for k, v := range r.AuditAnnotations {
			out.AuditAnnotations[k] = v
		}
	}
	if r.Changes != nil {
		out.Changes = make([]Change, len(r.Changes))
		for i, c := range r.Changes {
			c.Step = copyStep(c.Step)
			out.Changes[i] = c
		}
	}
	out.Unpredictable = slices.Clone(r.Unpredictable)
	out.Notes = slices.Clone(r.Notes)
	return &out
}

func copyStep(s Step) Step {
	if s.Candidates != nil {
		c := make([]Step, len(s.Candidates))
		for i, x := range s.Candidates {
			c[i] = copyStep(x)
		}
		s.Candidates = c
	}
	return s
}

func writeString(h hash.Hash, s string) {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(len(s)))
	h.Write(buf[:])
	h.Write([]byte(s))
}

func writeBool(h hash.Hash, b bool) {
	if b {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
}

// hashValue writes v, a JSON-like value as unstructured objects hold it,
// to h with its type: an int64 and a float64 of the same value decode
// differently, so they hash differently.
func hashValue(h hash.Hash, v any) {
	var buf [8]byte
	switch v := v.(type) {
	case nil:
		h.Write([]byte{'n'})
	case bool:
		h.Write([]byte{'b'})
		writeBool(h, v)
	case string:
		h.Write([]byte{'s'})
		writeString(h, v)
	case int64:
		h.Write([]byte{'i'})
		binary.BigEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	case float64:
		h.Write([]byte{'f'})
		binary.BigEndian.PutUint64(buf[:], math.Float64bits(v))
		h.Write(buf[:])
	case map[string]any:
		h.Write([]byte{'m'})
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		binary.BigEndian.PutUint64(buf[:], uint64(len(keys)))
		h.Write(buf[:])
		for _, k := range keys {
			writeString(h, k)
			hashValue(h, v[k])
		}
	case []any:
		h.Write([]byte{'l'})
		binary.BigEndian.PutUint64(buf[:], uint64(len(v)))
		h.Write(buf[:])
		for _, x := range v {
			hashValue(h, x)
		}
	default:
		// Other Go types (int, int32, ...) that callers put into objects:
		// their type is part of the key.
		writeString(h, fmt.Sprintf("%T:%v", v, v))
	}
}

// Remembered returns how many writes the chain answered with a result it
// remembered instead of admitting them again.
func (c *Chain) Remembered() int {
	c.memo.mu.Lock()
	defer c.memo.mu.Unlock()
	return c.memo.hits
}
