package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

type fixOptions struct {
	clusterFlags
	dryRun bool
	kinds  []string
	object string
	window time.Duration
	rounds int
}

func newFixCommand() *cobra.Command {
	o := &fixOptions{}
	cmd := &cobra.Command{
		Use:   "fix [DIR]...",
		Short: "Apply the verified fixes truce check finds to the working tree",
		Long: `fix runs truce check, takes for every object that does not settle the first
fix that was verified to resolve it (or the first of the kinds given with
--kind), and writes it to the working tree: the stored value into the manifest
(comments, key order and formatting of everything else kept byte for byte), a
kustomize patch, a ValidatingAdmissionPolicy replacing a mutating binding, the
Argo CD compare options, or a narrow ignore rule in the Application or
Kustomization. Fixes to the same file are applied one over the other.

Only the files the fixes need are written, each atomically (a temporary file
and a rename). With --dry-run nothing is written and the diffs are printed.
After writing, the repository is checked again and what still does not settle
is listed.

Exit status: 0 everything settles after the fixes, 1 something still does not,
2 error.`,
		Example: `  # See what would change
  truce fix examples/image-mirror --dry-run

  # Only ignore rules, only for the Deployment web
  truce fix ./deploy -c ./cluster --kind ignore-rule --object Deployment.apps/shop/web`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFix(cmd.Context(), cmd, o, args)
		},
	}
	f := cmd.Flags()
	o.clusterFlags.register(f)
	f.BoolVar(&o.dryRun, "dry-run", false, "print the changes instead of writing them")
	f.StringSliceVar(&o.kinds, "kind", nil, "fix kinds to use, in order: "+fixKindList()+" (default: the first verified)")
	f.StringVar(&o.object, "object", "", "fix only objects whose name (Kind[.group]/namespace/name) contains this")
	f.DurationVar(&o.window, "window", time.Hour, "the simulated window, as for check")
	f.IntVar(&o.rounds, "rounds", 16, "reconciliations simulated write by write, as for check")
	return cmd
}

func fixKindList() string {
	var names []string
	for _, k := range fix.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

func runFix(ctx context.Context, cmd *cobra.Command, o *fixOptions, args []string) error {
	var kinds []fix.Kind
	for _, k := range o.kinds {
		if !slices.Contains(fix.Kinds(), fix.Kind(k)) {
			return fmt.Errorf("unknown --kind %q (want %s)", k, fixKindList())
		}
		kinds = append(kinds, fix.Kind(k))
	}
	for _, a := range args {
		if _, ok := manifest.ParseGitArg(a); ok {
			return fmt.Errorf("%s: fix writes to a working tree; clone the repository and fix the directory", a)
		}
	}
	sim := simulate.Options{Window: o.window, MaxRounds: o.rounds}
	outcome, err := runCheck(ctx, cmd, &o.clusterFlags, args, "", "", "", sim, true)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	// Fixes are made again over the files as earlier fixes left them, so
	// two fixes of one file both land.
	overlay := map[string][]byte{}
	before := map[string][]byte{}
	read := func(path string) ([]byte, error) {
		if data, ok := overlay[path]; ok {
			return data, nil
		}
		return os.ReadFile(path)
	}
	applied := 0
	for _, pf := range outcome.Problems {
		name := pf.Ref.String()
		if o.object != "" && !strings.Contains(name, o.object) {
			continue
		}
		var kind fix.Kind
		if len(kinds) == 0 {
			if pf.Chosen == nil {
				fmt.Fprintf(out, "%s %s (%s): no verified fix\n", pf.Verdict, name, unitLabel(pf.Tool, pf.Unit))
				continue
			}
			kind = pf.Chosen.Kind
		} else {
			for _, k := range kinds {
				for _, c := range pf.Candidates {
					if c.Kind == k && kind == "" {
						kind = k
					}
				}
			}
			if kind == "" {
				fmt.Fprintf(out, "%s %s (%s): none of the fixes asked for applies\n", pf.Verdict, name, unitLabel(pf.Tool, pf.Unit))
				continue
			}
		}
		cands, skipped := fix.Candidates(pf.Problem, read)
		var c *fix.Candidate
		for _, cand := range cands {
			if cand.Kind == kind {
				c = cand
				break
			}
		}
		if c == nil {
			return fmt.Errorf("%s: the %s fix cannot be made over the earlier fixes: %s", name, kind, strings.Join(skipped, "; "))
		}
		applied++
		fmt.Fprintf(out, "%s %s (%s): %s\n", pf.Verdict, name, unitLabel(pf.Tool, pf.Unit), c.Title)
		if c.Warning != "" {
			fmt.Fprintf(out, "  warning: %s\n", c.Warning)
		}
		for _, p := range c.Paths() {
			if _, ok := before[p]; !ok {
				before[p] = c.Before[p]
			}
			overlay[p] = c.Files[p]
		}
	}
	if applied == 0 {
		fmt.Fprintln(out, "nothing to fix")
		if outcome.Report.Failed() {
			return exitError{exitFound}
		}
		return nil
	}
	paths := make([]string, 0, len(overlay))
	for p := range overlay {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	whole := &fix.Candidate{Files: overlay, Before: before}
	for _, p := range paths {
		if o.dryRun {
			fmt.Fprint(out, whole.Diff(p))
			continue
		}
		if err := yamledit.WriteFileAtomic(p, overlay[p]); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		verb := "updated"
		if before[p] == nil {
			verb = "created"
		}
		fmt.Fprintf(out, "%s %s\n", verb, p)
	}
	// Check again: with the files written, or over the overlay.
	after, err := recheck(ctx, cmd, o, args, sim, overlay)
	if err != nil {
		return err
	}
	counts := after.Report.Counts()
	var parts []string
	for _, v := range []string{"Synced", "Loop", "OutOfSync", "Rejected", "Pruned", "Unpredictable"} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	state := "after the fixes"
	if o.dryRun {
		state = "with the fixes (not written)"
	}
	fmt.Fprintf(out, "%s: %s\n", state, strings.Join(parts, ", "))
	if after.Report.Failed() {
		return exitError{exitFound}
	}
	return nil
}

// recheck checks the repository again, from disk or over an overlay.
func recheck(ctx context.Context, cmd *cobra.Command, o *fixOptions, args []string, sim simulate.Options, overlay map[string][]byte) (*check.Outcome, error) {
	_, aopts, _, err := o.clusterFlags.load(ctx)
	if err != nil {
		return nil, err
	}
	if !o.dryRun {
		overlay = nil
	}
	in, err := copyAndLoad(ctx, cmd, overlay, args, o.cluster, nil, false)
	if err != nil {
		return nil, err
	}
	return check.Check(ctx, in, check.Options{Admission: aopts, Simulation: sim}, nil, nil)
}

func unitLabel(tool, unit string) string {
	if unit == "" {
		return tool
	}
	return tool + " " + unit
}
