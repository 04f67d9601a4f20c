package manifest

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// sectionBatch is how many "---" sections are decoded ahead at most: it
// bounds the memory held by decoded documents waiting for their turn and
// the work wasted when a limit stops the call.
const sectionBatch = 64

// decodeSections decodes a batch of sections of one file with the result
// of decoding them one after the other: the same objects and errors in the
// same order, and the same stop at the same place when a call-wide limit
// (MaxDocuments, MaxAliasNodes) is exceeded.
//
// Parsing a document twice (positions and alias checks, then kubectl's
// decoding) is most of the time of reading manifests, and sections are
// independent but for the call's budgets. So the sections are decoded
// ahead on GOMAXPROCS goroutines, each as if it had the budgets to itself,
// noting what it would charge (decodeAhead); then, in order, each result
// is accepted when the budgets left at its turn cover its charges, and the
// section is decoded again on its own otherwise, which then stops the call
// as before.
func (d *decoder) decodeSections(name string, secs []section) {
	workers := d.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(secs))
	if workers <= 1 && d.opts.Memo == nil {
		for _, sec := range secs {
			if d.stopped {
				return
			}
			d.decodeSection(name, sec)
		}
		return
	}
	// Alias expansion ahead is bounded by what the call has left, as it
	// is one section at a time: a stream of documents that each expand
	// to nearly MaxAliasNodes is expanded no further than before.
	var budget atomic.Int64
	budget.Store(int64(d.aliasLeft))
	reserve := func(nodes int) bool {
		if budget.Add(-int64(nodes)) < 0 {
			budget.Add(int64(nodes))
			return false
		}
		return true
	}
	ahead := make([]*decoder, len(secs))
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(secs) {
				return
			}
			ahead[i] = d.decodeAhead(name, secs[i], reserve)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work() // the caller is one of the workers
	wg.Wait()
	for i, sec := range secs {
		if d.stopped {
			return
		}
		if r := ahead[i]; r == nil || !d.accept(r) {
			d.decodeSection(name, sec)
		}
	}
}

// decodeAhead decodes sec on a decoder of its own with every budget
// whole, or returns nil for a section that costs nothing to decode in
// turn (blank, or after a bad separator).
func (d *decoder) decodeAhead(name string, sec section, reserve func(int) bool) *decoder {
	if sec.badSeparator != "" || isBlankYAML(sec.data) {
		return nil
	}
	opts := d.opts
	opts.MaxDocuments = math.MaxInt
	memo := d.opts.Memo
	var key [32]byte
	var reserves []int
	if memo != nil {
		key = sectionKey(name, sec, opts)
		if r := memo.remembered(key, sec.line, opts, reserve); r != nil {
			return r
		}
		next := reserve
		reserve = func(n int) bool {
			ok := next(n)
			if ok {
				reserves = append(reserves, n)
			}
			return ok
		}
	}
	r := &decoder{opts: opts, aliasLeft: d.opts.MaxAliasNodes, record: true, reserve: reserve}
	doc, lastLine := sectionDocument(sec)
	r.guard(Source{File: name, Line: sec.line}, func() {
		r.decodeYAMLDocument(name, doc, sec.line, lastLine)
	})
	if memo != nil {
		memo.remember(key, sec.line, len(sec.data), r, reserves)
	}
	return r
}

// accept applies a section decoded ahead, as decoding it in turn would
// have, and reports whether it could: not when its alias expansion is more
// than the call has left (the section is then decoded in turn, which
// refuses it where the budget runs out).
//
// In turn, a section charges its document (after it parses), then its
// alias expansion, then the items of a List; an error after a charge ends
// the section, so every error and object of the section follows its
// charges, except the items' after the List's charge. A charge the call
// cannot afford stops it and drops what follows.
func (d *decoder) accept(r *decoder) bool {
	used := d.opts.MaxAliasNodes - r.aliasLeft
	if r.deferred || used > d.aliasLeft || r.stopped {
		return false
	}
	for i, c := range r.charges {
		if !d.countDocuments(c.src, c.n) {
			return true
		}
		if i == 0 {
			d.aliasLeft -= used
		}
	}
	d.errs = append(d.errs, r.errs...)
	d.objs = append(d.objs, r.objs...)
	return true
}
