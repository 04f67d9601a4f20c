package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"
)

// Memo remembers what the "---" sections of files decoded to, for the
// Decode and LoadPaths calls given it in Options.Memo, so that a file
// decoded again with a few documents changed (truce check decodes the
// file a fix edits for every candidate fix) parses only those. Results do
// not change: a section is remembered by its bytes, file name and the
// options its decoding reads, and replayed through the same budget
// accounting as a section decoded ahead (decodeSections), objects copied
// (NewSharedMemo: shared). A section that moved (a fix added lines above
// it) is replayed with its lines moved too, unless it decoded with errors,
// whose messages may quote lines: those are remembered at their line
// only. A Memo is safe for concurrent use.
type Memo struct {
	// shared: the objects remembered are handed out as they are, to
	// callers that never change them (NewSharedMemo).
	shared  bool
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*memoEntry
	// size is the bytes of the sections remembered.
	size int
}

// A Memo forgets everything when it holds more than maxMemoEntries
// sections or maxMemoBytes of them (DefaultMaxFileBytes: one file a fix
// edits, whose decoded objects take several times that).
const (
	maxMemoEntries = 1 << 16
	maxMemoBytes   = DefaultMaxFileBytes
)

// NewMemo returns an empty Memo. Every call given it owns the objects it
// returns.
func NewMemo() *Memo {
	return &Memo{entries: map[[sha256.Size]byte]*memoEntry{}}
}

// NewSharedMemo returns an empty Memo that hands the objects it remembers
// to every call that decodes the same section, without copying them: the
// callers must never change a returned object (its Object or Raw).
// truce check decodes the file a fix edits once per candidate fix, and
// copying its thousands of unchanged documents for each was most of the
// time of loading it.
func NewSharedMemo() *Memo {
	return &Memo{shared: true, entries: map[[sha256.Size]byte]*memoEntry{}}
}

// objects is what m hands out or keeps of objs: a copy, or, for a shared
// memo, objs.
func (m *Memo) objects(objs []Object) []Object {
	if m.shared {
		return objs
	}
	return copyObjects(objs)
}

// memoEntry is a section decoded ahead: what its decoder recorded, and
// the alias budget it reserved from its batch, in order.
type memoEntry struct {
	// line is the file line the section started on when decoded.
	line      int
	objs      []Object
	errs      []error
	charges   []charge
	aliasLeft int
	stopped   bool
	reserves  []int
}

// sectionKey digests what decoding sec of file name reads, but for the
// line it starts on (see memoEntry.line).
func sectionKey(name string, sec section, opts Options) [sha256.Size]byte {
	h := sha256.New()
	str := func(s string) {
		writeInt(h, int64(len(s)))
		h.Write([]byte(s))
	}
	str(name)
	writeInt(h, opts.MaxFileBytes)
	writeInt(h, opts.MaxTotalBytes)
	writeInt(h, int64(opts.MaxDepth))
	writeInt(h, int64(opts.MaxAliasNodes))
	str(opts.LimitNames.FileBytes)
	str(opts.LimitNames.TotalBytes)
	str(opts.LimitNames.Documents)
	writeInt(h, int64(len(sec.data)))
	h.Write(sec.data)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func writeInt(h hash.Hash, n int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func (m *Memo) get(k [sha256.Size]byte) *memoEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries[k]
}

func (m *Memo) put(k [sha256.Size]byte, size int, e *memoEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.entries) >= maxMemoEntries || m.size+size > maxMemoBytes {
		clear(m.entries)
		m.size = 0
	}
	m.entries[k] = e
	m.size += size
}

// copyObjects copies objs deeply: the caller owns what a decode returns.
func copyObjects(objs []Object) []Object {
	if objs == nil {
		return nil
	}
	out := make([]Object, len(objs))
	for i, o := range objs {
		out[i] = o
		if o.Object != nil {
			out[i].Object = o.Object.DeepCopy()
		}
		out[i].Raw = bytes.Clone(o.Raw)
	}
	return out
}

// remembered returns the decoder of a section starting on line that was
// decoded ahead before, its alias reservations replayed against this
// batch's budget (a refused one defers the section, as it did when
// decoding it), or nil.
func (m *Memo) remembered(k [sha256.Size]byte, line int, opts Options, reserve func(int) bool) *decoder {
	e := m.get(k)
	if e == nil || (e.line != line && len(e.errs) > 0) {
		return nil
	}
	r := &decoder{opts: opts, record: true, reserve: reserve}
	for _, n := range e.reserves {
		if !reserve(n) {
			r.deferred = true
			return r
		}
	}
	r.objs = m.objects(e.objs)
	r.errs = append([]error(nil), e.errs...)
	r.charges = append([]charge(nil), e.charges...)
	if delta := line - e.line; delta != 0 {
		if m.shared { // the entry's slice is handed out: the moved Sources are this call's
			r.objs = append([]Object(nil), r.objs...)
		}
		for i := range r.objs {
			r.objs[i].Source = moved(r.objs[i].Source, delta)
		}
		for i := range r.charges {
			r.charges[i].src = moved(r.charges[i].src, delta)
		}
	}
	r.aliasLeft = e.aliasLeft
	r.stopped = e.stopped
	return r
}

// moved is src with its line moved by delta; a Source of the whole file
// (line 0) stays.
func moved(src Source, delta int) Source {
	if src.Line > 0 {
		src.Line += delta
	}
	return src
}

// remember keeps what r, a section starting on line decoded ahead with
// reservations reserves, decoded to; a deferred section is incomplete and
// not kept.
func (m *Memo) remember(k [sha256.Size]byte, line, size int, r *decoder, reserves []int) {
	if r.deferred {
		return
	}
	m.put(k, size, &memoEntry{
		line:      line,
		objs:      m.objects(r.objs),
		errs:      append([]error(nil), r.errs...),
		charges:   append([]charge(nil), r.charges...),
		aliasLeft: r.aliasLeft,
		stopped:   r.stopped,
		reserves:  reserves,
	})
}
