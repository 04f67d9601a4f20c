package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

// verifyFromLive verifies a fix that takes fields out of Git from the
// state the current Git leaves, as the fix meets it in a running cluster:
// the unit is simulated with the current Git, then, on the same cluster,
// with the fix applied. Who owns a field then decides what dropping it
// does: server-side apply leaves a field the controller's Update took
// over; kubectl's three-way merge deletes a field its
// last-applied-configuration still holds. A fix under which the tool
// writes the fields again is not safe: its candidate gets the warning,
// and the verdict is the object's verdict over that transition.
func (r *Repository) verifyFromLive(ctx context.Context, load Loader, c *fix.Candidate, s *simulate.Setup, o *simulate.Object, opts Options) (simulate.Verdict, bool, error) {
	in, err := load(ctx, c.Files)
	if err != nil {
		return "", false, err
	}
	r2, err := r.prepareCandidate(ctx, in, opts)
	if err != nil {
		return "", false, err
	}
	setups, err := r2.Setups()
	if err != nil {
		return "", false, err
	}
	var s2 *simulate.Setup
	for _, cand := range setups {
		if cand.Tool == s.Tool && cand.Unit == s.Unit {
			s2 = cand
		}
	}
	if s2 == nil {
		return "", false, fmt.Errorf("%s is gone with the fix applied", unitName(s.Tool, s.Unit))
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl, err := r.currentState(cctx, s, o, opts)
	if err != nil {
		return "", false, err
	}
	defer cl.Close()
	after, err := r2.runOn(ctx, cl, setups, s2, o, opts)
	if err != nil {
		return "", false, fmt.Errorf("simulating the fix from the current Git's state: %w", err)
	}
	want := map[string]bool{}
	for _, f := range c.Fields {
		want[f] = true
	}
	var rewrites int
	for _, w := range after.Writes {
		if w.Ref != o.Ref || !w.ByTool || !w.Changed || w.Error != "" {
			continue
		}
		for _, f := range w.Fields {
			if want[f.Pointer] {
				rewrites++
				break
			}
		}
	}
	verdict := simulate.Synced
	for _, got := range after.Objects {
		if got.Ref == o.Ref {
			verdict = got.Verdict
		}
	}
	if rewrites == 0 {
		return verdict, true, nil
	}
	other := "the other writer"
	if o.Loop != nil {
		other = o.Loop.Other
	}
	c.Warning = fmt.Sprintf("%s still owns %s from its last apply (%d write(s) of the tool to it after the change, simulated): the field is removed on the next apply, then %s sets it again; "+
		"meanwhile the object has the API server's default. Remove the field from what the tool remembers of its last apply first, or accept that moment.",
		report.ToolTitle(s.Tool), strings.Join(c.Fields, ", "), rewrites, other)
	c.Unsafe = true
	return verdict, false, nil
}

// currentState returns a cluster as the current Git leaves it most of
// the time: the unit simulated up to the other writer's last write to o
// (in a loop the tool's writes are minutes apart and the controller
// answers within seconds). The simulation is run once to find that
// moment, then again on the cluster returned, stopped there.
func (r *Repository) currentState(ctx context.Context, s *simulate.Setup, o *simulate.Object, opts Options) (*memory.Cluster, error) {
	setups, err := r.Setups()
	if err != nil {
		return nil, err
	}
	// s is one of r's setups, made again: the same unit.
	for _, cand := range setups {
		if cand.Tool == s.Tool && cand.Unit == s.Unit {
			s = cand
		}
	}
	scratch, err := r.NewCluster(ctx, opts.Admission)
	if err != nil {
		return nil, err
	}
	res, err := r.runOn(ctx, scratch, setups, s, o, opts)
	scratch.Close()
	if err != nil {
		return nil, fmt.Errorf("simulating the current Git: %w", err)
	}
	for _, w := range res.Writes {
		if w.Ref == o.Ref && !w.ByTool && w.Changed && w.Error == "" && w.At > 0 {
			opts.Simulation.Window = w.At
		}
	}
	cl, err := r.NewCluster(ctx, opts.Admission)
	if err != nil {
		return nil, err
	}
	if _, err := r.runOn(ctx, cl, setups, s, o, opts); err != nil {
		cl.Close()
		return nil, fmt.Errorf("simulating the current Git: %w", err)
	}
	return cl, nil
}

// verifyCandidate verifies c: from the current Git's state when the fix
// asks for it (see verifyFromLive), else from an empty cluster. safe is
// false when the tool still writes the fields the fix gives away.
func (r *Repository) verifyCandidate(ctx context.Context, load Loader, c *fix.Candidate, s *simulate.Setup, o *simulate.Object, opts Options) (v simulate.Verdict, safe bool, err error) {
	if c.FromLive && o.InGit {
		return r.verifyFromLive(ctx, load, c, s, o, opts)
	}
	v, err = r.verify(ctx, load, c, s, o, opts)
	return v, true, err
}

// runOn runs setup s of setups for object o on cluster cl, with the
// world verify simulates (worldOf), and returns s's result.
func (r *Repository) runOn(ctx context.Context, cl cluster.Cluster, setups []*simulate.Setup, s *simulate.Setup, o *simulate.Object, opts Options) (*simulate.Result, error) {
	members, desired, at := r.worldOf(setups, s, o)
	res, err := r.runWorld(ctx, cl, members, desired, opts)
	if err != nil {
		return nil, err
	}
	return res[at], nil
}
