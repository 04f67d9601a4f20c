package fix

import (
	"fmt"
	"os"
	"strings"

	"github.com/truce-dev/truce/fix/yamledit"
)

// Plan is fixes applied one over the other: each is made again over the
// files as the earlier ones left them, so that two fixes of one file both
// land. Its Files and Before hold every file written, with the content
// before the first fix (nil for files a fix creates).
type Plan struct {
	Candidate
	read Reader
	// removed are the fixes that took fields out of Git, by object,
	// source and fields: the same object under another tool needs the
	// same edit, already made.
	removed map[string]*Candidate
}

// NewPlan starts a plan over the files read reads (os.ReadFile when nil).
func NewPlan(read Reader) *Plan {
	if read == nil {
		read = os.ReadFile
	}
	return &Plan{Candidate: Candidate{Files: map[string][]byte{}, Before: map[string][]byte{}}, read: read, removed: map[string]*Candidate{}}
}

// Add makes p's fix of the given kind over the files as the plan left
// them, adds it to the plan and returns it.
func (pl *Plan) Add(p Problem, kind Kind) (*Candidate, error) {
	read := func(path string) ([]byte, error) {
		if data, ok := pl.Files[path]; ok {
			return data, nil
		}
		return pl.read(path)
	}
	key := ""
	if kind == KindGiveToController {
		key = fmt.Sprintf("%s %s %s", p.Object.Ref, p.Source, strings.Join(p.loopFields(), ","))
		if c, ok := pl.removed[key]; ok {
			return c, nil
		}
	}
	cands, skipped := Candidates(p, read)
	var c *Candidate
	for _, cand := range cands {
		if cand.Kind == kind {
			c = cand
			break
		}
	}
	if c == nil {
		return nil, fmt.Errorf("the %s fix cannot be made over the earlier fixes: %s", kind, strings.Join(skipped, "; "))
	}
	for _, path := range c.Paths() {
		if _, ok := pl.Before[path]; !ok {
			pl.Before[path] = c.Before[path]
		}
		pl.Files[path] = c.Files[path]
	}
	if key != "" {
		pl.removed[key] = c
	}
	return c, nil
}

// Written is one file a plan wrote.
type Written struct {
	Path string
	// Created is true for a file that did not exist.
	Created bool
}

// Write writes the plan's files, each atomically, in path order.
func (pl *Plan) Write() ([]Written, error) {
	var out []Written
	for _, path := range pl.Paths() {
		if err := yamledit.WriteFileAtomic(path, pl.Files[path]); err != nil {
			return out, fmt.Errorf("writing %s: %w", path, err)
		}
		out = append(out, Written{Path: path, Created: pl.Before[path] == nil})
	}
	return out, nil
}
