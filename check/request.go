package check

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/truce-dev/truce/fix"
)

// Request is one `truce check`: the input, where it was read from, and
// how to simulate.
type Request struct {
	Input   Input
	Sources Sources
	Options Options
	// Verify verifies each fix by simulating again with it in place.
	Verify bool
	// Load reads the input again with a fix's files over it; nil reads
	// it from Sources (NewLoader). A repository read through its entry
	// points needs WorldLoader.
	Load Loader
}

// Run checks the input of req: the simulations, and for each problem the
// fixes, verified on the files unless req.Verify is false. Fixes of a
// repository read from Git are offered as edits of a clone.
func Run(ctx context.Context, req Request) (*Outcome, error) {
	var load Loader
	if req.Verify {
		load = req.Load
		if load == nil {
			load = NewLoader(req.Sources, req.Input)
		}
	}
	var read fix.Reader
	if req.Sources.git() {
		// Fixes are edits of a working tree.
		read = func(path string) ([]byte, error) {
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("%s is read from Git; run truce check on a clone to get fixes as edits", path)
			}
			return os.ReadFile(path)
		}
	}
	out, err := Check(ctx, req.Input, req.Options, load, read)
	if err != nil {
		return nil, err
	}
	out.Report.Repository = strings.Join(req.Sources.Repository, " ")
	return out, nil
}

// FixOptions choose the fixes `truce fix` applies.
type FixOptions struct {
	// Kinds are the kinds of fix to use, in order of preference; none:
	// the first fix verified to resolve the problem.
	Kinds []fix.Kind
	// Object keeps the problems of objects whose name (Kind[.group]/
	// namespace/name) contains it; "" keeps all.
	Object string
	// DryRun writes nothing: the check after the fixes reads the files
	// with the fixes over them.
	DryRun bool
}

// Applied is what `truce fix` did.
type Applied struct {
	// Before is the check the fixes were chosen from.
	Before *Outcome
	// Choices are the problems looked at, in the report's order.
	Choices []Choice
	// Plan holds the files the fixes write (written unless DryRun).
	Plan *fix.Plan
	// Written lists the files written.
	Written []fix.Written
	// After is the check with the fixes in place; nil when no fix applies.
	After *Outcome
}

// Fixed counts the problems a fix was applied to.
func (a *Applied) Fixed() int {
	n := 0
	for _, c := range a.Choices {
		if c.Fix != nil {
			n++
		}
	}
	return n
}

// Choice is the fix chosen for one problem.
type Choice struct {
	*ProblemFixes
	// Fix is the fix applied, made over the earlier ones; nil when none
	// applies (Reason says why).
	Fix    *fix.Candidate
	Reason string
}

// Fix checks req's input with fixes verified, applies to the files the
// fix opts choose for each problem, one over the other, and checks again.
func Fix(ctx context.Context, req Request, opts FixOptions) (*Applied, error) {
	if req.Sources.git() {
		return nil, fmt.Errorf("fix writes to a working tree; clone the repository and fix the directory")
	}
	req.Verify = true
	before, err := Run(ctx, req)
	if err != nil {
		return nil, err
	}
	a := &Applied{Before: before, Plan: fix.NewPlan(nil)}
	for _, pf := range before.Problems {
		if opts.Object != "" && !strings.Contains(pf.Ref.String(), opts.Object) {
			continue
		}
		ch := Choice{ProblemFixes: pf}
		kind, reason := pf.pick(opts.Kinds)
		if reason != "" {
			ch.Reason = reason
			a.Choices = append(a.Choices, ch)
			continue
		}
		if ch.Fix, err = a.Plan.Add(pf.Problem, kind); err != nil {
			return nil, fmt.Errorf("%s: %w", pf.Ref.String(), err)
		}
		a.Choices = append(a.Choices, ch)
	}
	if a.Fixed() == 0 {
		return a, nil
	}
	if !opts.DryRun {
		if a.Written, err = a.Plan.Write(); err != nil {
			return a, err
		}
	}
	// Check again over the fixes' files: written or not, they are what
	// the repository holds now (a loader's copy of the repository may
	// predate the writing).
	overlay := a.Plan.Files
	var in Input
	if req.Load != nil {
		in, err = req.Load(ctx, overlay)
	} else {
		in, err = LoadOver(ctx, Sources{Repository: req.Sources.Repository, Cluster: req.Sources.Cluster}, overlay, nil)
	}
	if err != nil {
		return a, err
	}
	if a.After, err = Check(ctx, in, req.Options, nil, nil); err != nil {
		return a, err
	}
	return a, nil
}

// pick returns the kind of fix to apply: the verified one, or the first
// of kinds that is a candidate; else why there is none.
func (pf *ProblemFixes) pick(kinds []fix.Kind) (fix.Kind, string) {
	if len(kinds) == 0 {
		if pf.Chosen == nil {
			return "", "no verified fix"
		}
		return pf.Chosen.Kind, ""
	}
	for _, k := range kinds {
		if slices.ContainsFunc(pf.Candidates, func(c *fix.Candidate) bool { return c.Kind == k }) {
			return k, ""
		}
	}
	return "", "none of the fixes asked for applies"
}
