package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/progress"
	treport "github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

// fixOptions are truce fix's flags; complete, validate and run are its
// steps, as in kubectl's commands.
type fixOptions struct {
	clusterFlags
	renderFlags
	limitFlags
	runFlags
	dryRun bool
	kinds  []string
	object string
	window time.Duration
	rounds int

	// args are the directories to fix; fixKinds is --kind, typed.
	args     []string
	fixKinds []fix.Kind
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
			if err := o.complete(args); err != nil {
				return err
			}
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	o.clusterFlags.register(f)
	o.renderFlags.register(f)
	o.limitFlags.register(f)
	o.runFlags.register(f)
	o.clusterFlags.limits, o.renderFlags.limits = &o.limitFlags, &o.limitFlags
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

// complete fills in what the flags leave to the arguments.
func (o *fixOptions) complete(args []string) error {
	o.args = args
	o.fixKinds = nil
	for _, k := range o.kinds {
		o.fixKinds = append(o.fixKinds, fix.Kind(k))
	}
	return nil
}

// validate refuses unknown fix kinds and Git sources before anything is
// read.
func (o *fixOptions) validate() error {
	for _, k := range o.fixKinds {
		if !slices.Contains(fix.Kinds(), k) {
			return fmt.Errorf("unknown --kind %q (want %s)", k, fixKindList())
		}
	}
	for _, a := range o.args {
		if _, ok := manifest.ParseGitArg(a); ok {
			return fmt.Errorf("%s: fix writes to a working tree; clone the repository and fix the directory", a)
		}
	}
	return o.runFlags.validate()
}

// run applies the fixes and prints what was done.
func (o *fixOptions) run(cmd *cobra.Command) error {
	r := o.runFlags.start(cmd)
	defer r.stop()
	ctx := r.ctx
	ws := check.NewWorkspace()
	defer ws.Close()
	progress.Report(r.sink, progress.Event{Stage: progress.Reading})
	reqs, err := loadCheckRequests(ctx, cmd, ws, &o.clusterFlags, &o.renderFlags, o.args, "", "", "")
	if err != nil {
		return readError(r, err)
	}
	failed := false
	for _, req := range reqs {
		req.Options.Simulation = simulate.Options{Window: o.window, MaxRounds: o.rounds}
		req.Options.Progress = r.sink
		applied, err := check.Fix(ctx, req, check.FixOptions{Kinds: o.fixKinds, Object: o.object, DryRun: o.dryRun})
		if r.line != nil {
			r.line.Close()
		}
		if applied != nil {
			if req.Input.World != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s:\n", req.Input.World)
			}
			printFixes(cmd.OutOrStdout(), applied, o.dryRun)
		}
		if err != nil {
			return readError(r, err)
		}
		after := applied.After
		if after == nil {
			after = applied.Before
		}
		failed = failed || after.Report.Failed()
	}
	if r.timedOut() {
		return r.result(nil)
	}
	if failed {
		return exitError{exitFound}
	}
	return nil
}

// printFixes prints, per problem, the fix applied (or why none), then the
// diffs (dry run) or the files written, then the verdicts after.
func printFixes(out io.Writer, a *check.Applied, dryRun bool) {
	for _, c := range a.Choices {
		what := fmt.Sprintf("%s %s (%s)", c.Verdict, c.Ref.String(), unitLabel(c.Tool, c.Unit))
		if c.Fix == nil {
			fmt.Fprintf(out, "%s: %s\n", what, c.Reason)
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", what, c.Fix.Title)
		if c.Fix.Warning != "" {
			fmt.Fprintf(out, "  warning: %s\n", c.Fix.Warning)
		}
	}
	if a.Fixed() == 0 {
		fmt.Fprintln(out, "nothing to fix")
		return
	}
	if dryRun {
		for _, p := range a.Plan.Paths() {
			fmt.Fprint(out, a.Plan.Diff(p))
		}
	}
	for _, w := range a.Written {
		verb := "updated"
		if w.Created {
			verb = "created"
		}
		fmt.Fprintf(out, "%s %s\n", verb, w.Path)
	}
	if a.After == nil {
		return
	}
	counts := a.After.Report.Counts()
	var parts []string
	for _, v := range treport.SortedVerdicts(counts) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
	}
	state := "after the fixes"
	if dryRun {
		state = "with the fixes (not written)"
	}
	fmt.Fprintf(out, "%s: %s\n", state, strings.Join(parts, ", "))
}

func unitLabel(tool, unit string) string {
	if unit == "" {
		return tool
	}
	return tool + " " + unit
}
