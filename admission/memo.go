package admission

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A chain remembers the results of the writes it admitted, keyed by what
// the result is a function of, so that a write admitted again against the
// same state is answered without running admission again: the simulation
// writes the same object round after round (self-heal), a dry run is
// followed by the same write for real (truce diff, Flux), and truce check
// verifies every candidate fix on a fresh cluster that receives the same
// writes again.
//
// What an admission reads: the request, the stored object it replaces,
// what the chain compiled from the state (policies, bindings, webhook
// configurations, CRDs, params), what the plugins read through their
// informers and clients (namespaces, ServiceAccounts, RBAC, LimitRanges,
// PriorityClasses..., anything an informer holds), and how the chain was
// built (its plugins, field validation, the field manager of the state's
// objects). The key is a digest of all of it: of the request, of the stored
// object, of the options, and of the content of every object of the state
// admission reads (the relevant objects, memoDigest), combined so that it
// does not depend on the order they were written in and is kept up to date
// with each commit. Two chains given the same Cache share what they
// remember: a fresh cluster holding the same relevant objects answers the
// writes another cluster admitted from memory.
//
// Fresh clusters give the objects of their state new uids,
// creationTimestamps and managedFields times; a write's admission sees
// those of the relevant objects only through a policy's CEL (the built-in
// plugins read labels, specs and rules). When no policy of the state
// mentions them (or uses namespaceObject, params or their metadata whole),
// the digest leaves them out (identity-blind), so that fresh clusters share
// answers; otherwise it covers every field. The stored object a write
// replaces is always covered whole: it is part of the answer.
//
// The memo is off where admission has inputs outside the state: webhooks
// (a server answers as it likes, and may count calls), ResourceQuota
// (admission writes the quota's usage), admission plugins the server does
// not enable by default (EventRateLimit counts, NamespaceAutoProvision
// creates namespaces, ImagePolicyWebhook calls out). Writes of Services
// are never remembered: their addresses are allocated from the chain's
// allocator, whose state moves with every Service stored. A chain told of
// namespaces outside its state (PutNamespace, the webhook server) keeps
// what it remembers from then on to itself.
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

// memoCapacity bounds the remembered results of a chain built without a
// Cache; past it, the oldest are forgotten.
const memoCapacity = 4096

// sharedMemoCapacity bounds the results a Cache remembers for all its
// chains: a repository's writes, each in a few states.
const sharedMemoCapacity = 1 << 14

type memoKey [sha256.Size]byte

// memoStore holds remembered results by key, the oldest forgotten past its
// capacity; it is safe for concurrent use.
type memoStore struct {
	mu       sync.Mutex
	capacity int
	entries  map[memoKey]*Result
	// order is a ring of the keys in entries, oldest at next.
	order []memoKey
	next  int
}

func newMemoStore(capacity int) *memoStore {
	return &memoStore{capacity: capacity, entries: map[memoKey]*Result{}}
}

// memoStore returns the results remembered for every chain built with c.
func (c *Cache) memoStore() *memoStore {
	c.resultsOnce.Do(func() { c.results = newMemoStore(sharedMemoCapacity) })
	return c.results
}

// privateMemo numbers the chains that keep their keys to themselves.
var privateMemo atomic.Uint64

type memo struct {
	mode  memoMode
	store *memoStore
	// config is the digest of how the chain was built (plugins, options).
	config [sha256.Size]byte
	// identityBlind leaves uids, creationTimestamps, resourceVersions and
	// managedFields times of the relevant objects out of the digest.
	identityBlind bool

	mu sync.Mutex
	// hashes are the relevant objects' digests, sum their lane-wise sum
	// (order-independent, and a removal subtracts).
	hashes map[objectKey][sha256.Size]byte
	sum    [4]uint64
	// private, when not zero, makes the keys this chain's own: it was told
	// of something outside its state.
	private uint64
	hits    int
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
	m := &memo{store: newMemoStore(memoCapacity), hashes: map[objectKey][sha256.Size]byte{}}
	if opts.NoMemo || !defaultOnlyPlugins(names) {
		return m
	}
	blind, identityBlind := true, true
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
		if o.GroupVersionKind().Group != "admissionregistration.k8s.io" {
			continue
		}
		if isPolicyKind(o.GetKind()) && mentionsDryRun(o.Object) {
			blind = false
		}
		if strings.HasSuffix(o.GetKind(), "AdmissionPolicy") || strings.HasSuffix(o.GetKind(), "AdmissionPolicyBinding") {
			if readsIdentity(o.Object["spec"]) {
				identityBlind = false
			}
		}
	}
	m.mode = memoOn
	if blind {
		m.mode = memoDryRunBlind
	}
	m.identityBlind = identityBlind
	if opts.Cache != nil && len(opts.Engines) == 0 {
		m.store = opts.Cache.memoStore()
	}
	h := sha256.New()
	writeStrings(h, names)
	writeStrings(h, []string{opts.FieldValidation, opts.ServiceClusterIPRange, opts.StateFieldManager})
	writeBool(h, opts.CallURLWebhooks)
	writeBool(h, m.mode == memoDryRunBlind)
	writeBool(h, m.identityBlind)
	h.Sum(m.config[:0])
	return m
}

// mentionsDryRun reports whether any string of v (a policy's expressions
// among them) names dryRun or the request's options, where CEL reads
// whether the request is a dry run.
func mentionsDryRun(v any) bool {
	return anyString(v, func(s string) bool {
		return strings.Contains(s, "dryRun") || strings.Contains(s, "options")
	})
}

// identityFields are what a fresh cluster generates for each object.
var identityFields = []string{"uid", "creationTimestamp", "resourceVersion", "managedFields"}

// readsIdentity reports whether any string of v (a policy's or binding's
// spec) names a generated field of an object, or uses namespaceObject,
// params or their metadata whole, where CEL could read the generated
// fields of the objects of the state.
func readsIdentity(v any) bool {
	return anyString(v, func(s string) bool {
		for _, f := range identityFields {
			if strings.Contains(s, f) {
				return true
			}
		}
		return usedWhole(s, "namespaceObject") || usedWhole(s, "params")
	})
}

// usedWhole reports whether word occurs in s (as an identifier) other than
// followed by a field selection below metadata.
func usedWhole(s, word string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		j += i
		i = j + len(word)
		if j > 0 && isIdent(s[j-1]) || i < len(s) && isIdent(s[i]) {
			continue
		}
		rest := strings.TrimLeft(s[i:], " \t\n")
		if r, ok := strings.CutPrefix(rest, ".metadata"); ok && (r == "" || !isIdent(r[0])) {
			rest = strings.TrimLeft(r, " \t\n")
		}
		if !strings.HasPrefix(rest, ".") {
			return true
		}
	}
}

func isIdent(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// anyString reports whether pred holds for a string (key or value) of v.
func anyString(v any, pred func(string) bool) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if pred(k) || anyString(x, pred) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if anyString(x, pred) {
				return true
			}
		}
	case string:
		return pred(v)
	}
	return false
}

// relevant reports whether admission may read objects of gvk other than
// the one a write replaces: those the digest covers. Services are read by
// the allocator of Service writes only, which are not remembered.
func (c *Chain) relevant(gvk k8sschema.GroupVersionKind) bool {
	gk := gvk.GroupKind()
	return c.rebuilds(gvk) || configurationKinds.Has(gvk.Kind) || mirroredKinds.Has(gk) || c.mirror.watched(gvk)
}

// reset computes the digest of the chain's state afresh.
func (m *memo) reset(c *Chain) {
	if m.mode == memoOff {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hashes = map[objectKey][sha256.Size]byte{}
	m.sum = [4]uint64{}
	for _, k := range c.state.order {
		m.refreshLocked(c, k)
	}
}

// refresh brings the digest up to date with the objects at keys, written
// or deleted since.
func (m *memo) refresh(c *Chain, keys ...objectKey) {
	if m.mode == memoOff {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		m.refreshLocked(c, k)
	}
}

func (m *memo) refreshLocked(c *Chain, k objectKey) {
	if old, ok := m.hashes[k]; ok {
		for i := range m.sum {
			m.sum[i] -= binary.BigEndian.Uint64(old[8*i:])
		}
		delete(m.hashes, k)
	}
	o, ok := c.state.objects[k]
	if !ok || !c.relevant(o.GroupVersionKind()) {
		return
	}
	h := sha256.New()
	writeStrings(h, []string{k.Group, k.Kind, k.Namespace, k.Name})
	obj := o.Object
	if m.identityBlind {
		obj = withoutIdentity(obj)
	}
	hashValue(h, obj)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	m.hashes[k] = d
	for i := range m.sum {
		m.sum[i] += binary.BigEndian.Uint64(d[8*i:])
	}
}

// withoutIdentity is obj (shallowly copied) without the fields a fresh
// cluster generates for it.
func withoutIdentity(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	out := maps.Clone(obj)
	md = maps.Clone(md)
	out["metadata"] = md
	delete(md, "uid")
	delete(md, "creationTimestamp")
	delete(md, "resourceVersion")
	if mf, ok := md["managedFields"].([]any); ok {
		entries := make([]any, len(mf))
		for i, e := range mf {
			if e, ok := e.(map[string]any); ok {
				e = maps.Clone(e)
				delete(e, "time")
				entries[i] = e
				continue
			}
			entries[i] = e
		}
		md["managedFields"] = entries
	}
	return out
}

// isolate makes the chain's keys its own from now on: it was told of state
// (a namespace) that other chains with the same objects do not have.
func (m *memo) isolate() {
	m.mu.Lock()
	m.private = privateMemo.Add(1)
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
	sum, private := m.sum, m.private
	m.mu.Unlock()
	h := sha256.New()
	h.Write(m.config[:])
	var buf [8]byte
	for _, x := range append(sum[:], private) {
		binary.BigEndian.PutUint64(buf[:], x)
		h.Write(buf[:])
	}
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
	m.store.mu.Lock()
	r, ok := m.store.entries[k]
	m.store.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	m.hits++
	m.mu.Unlock()
	out := copyResult(r)
	out.Source = source
	return out, true
}

// put remembers a copy of r by k.
func (m *memo) put(k memoKey, r *Result) {
	m.store.put(k, copyResult(r))
}

// put keeps r by k.
func (s *memoStore) put(k memoKey, r *Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[k]; ok {
		return
	}
	if len(s.order) < s.capacity {
		s.order = append(s.order, k)
	} else {
		delete(s.entries, s.order[s.next])
		s.order[s.next] = k
		s.next = (s.next + 1) % s.capacity
	}
	s.entries[k] = r
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

func writeStrings(h hash.Hash, ss []string) {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(len(ss)))
	h.Write(buf[:])
	for _, s := range ss {
		writeString(h, s)
	}
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
