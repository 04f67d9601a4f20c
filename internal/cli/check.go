package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/lint"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/progress"
	treport "github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

// checkOptions are truce check's flags; complete, validate and run are
// its steps, as in kubectl's commands.
type checkOptions struct {
	clusterFlags
	renderFlags
	limitFlags
	runFlags
	format      string
	output      string
	color       string
	window      time.Duration
	rounds      int
	noVerify    bool
	verbose     bool
	kubeconfig  string
	kubeContext string
	ref         string

	// args are the repositories to check.
	args []string
}

// Check formats.
const checkFormats = "text, json, sarif, junit or html"

func newCheckCommand() *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check [DIR|GIT-URL]...",
		Short: "Will the GitOps tool settle or fight? Simulate it, and find the verified narrowest fix",
		Long: `check reads a repository — manifests (plain YAML or kustomize), the cluster's
admission configuration (MutatingAdmissionPolicies, ValidatingAdmissionPolicies,
webhook configurations, in the repository or given with -c), Argo CD
Applications and argocd-cm, Flux Kustomizations, and a truce.dev/v1alpha1
Writers document naming the other controllers that write (HPAs and cert-manager
injection annotations are found by themselves) — and simulates every GitOps
tool that reconciles it, round by round, against the in-process cluster with
the admission chain in its write path.

For every object it says Synced, OutOfSync (drift the tool does not correct),
Loop (the field, the two writers, writes per hour at the tool's pace), Pruned,
Rejected or Unpredictable, with the evidence: the rounds and who wrote what.
For every problem it proposes fixes in order of preference (put the mutation
in Git, switch mutate to validate, Argo CD server-side diff with
IncludeMutationWebhook, a narrow ignore rule), and verifies each by simulating
again with the fix applied. 'truce fix' writes the chosen one.

Without Argo CD or Flux settings in the repository, both tools are simulated
with their defaults (Argo CD: automated sync, self-heal, prune; Flux: every
10 minutes).

Exit status: 0 everything settles, 1 something loops, is rejected, pruned or
stays OutOfSync, 2 error.`,
		Example: `  # The image-mirror loop (a policy rewrites the image Git sets), and its fix
  truce check examples/image-mirror

  # For CI: SARIF for code scanning, JUnit for the test view
  truce check ./deploy -c ./cluster --format sarif > truce.sarif
  truce check ./deploy -c ./cluster --format junit > truce.xml

  # A page to look at
  truce check examples/hpa-flux --format html > report.html`,
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
	f.StringVar(&o.format, "format", "text", "output format: "+checkFormats)
	f.StringVarP(&o.output, "output", "o", "", "write the report to this file (atomically) instead of stdout")
	f.StringVar(&o.color, "color", "auto", "colour the text output: auto (when stdout is a terminal), always or never")
	f.DurationVar(&o.window, "window", time.Hour, "the stretch of time the verdicts and write counts cover")
	f.IntVar(&o.rounds, "rounds", 16, "reconciliations simulated write by write per tool; the rest of the window is extrapolated from the cycle")
	f.BoolVar(&o.noVerify, "no-verify", false, "propose fixes without simulating again to verify them")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "text: list every object and every write")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "read the admission configuration, namespaces, CRDs and the live objects from this cluster (read only) instead of -c")
	f.StringVar(&o.kubeContext, "context", "", "the kubeconfig context")
	f.StringVar(&o.ref, "ref", "", "for a Git repository: the branch, tag or commit to read")
	return cmd
}

// complete fills in what the flags leave to the arguments.
func (o *checkOptions) complete(args []string) error {
	o.args = args
	return nil
}

// live reports whether the cluster is read from --kubeconfig.
func (o *checkOptions) live() bool { return o.kubeconfig != "" || o.kubeContext != "" }

// validate refuses flags that do not go together, before anything is read.
func (o *checkOptions) validate() error {
	switch o.format {
	case "text", "json", "sarif", "junit", "html":
	default:
		return fmt.Errorf("unknown --format %q (want %s)", o.format, checkFormats)
	}
	if _, err := useColor(o.color, io.Discard); err != nil {
		return err
	}
	if o.live() && len(o.cluster) > 0 {
		return fmt.Errorf("--kubeconfig reads the cluster; -c describes one: use one or the other")
	}
	return o.runFlags.validate()
}

// run checks, adds truce lint's findings and prints the report.
func (o *checkOptions) run(cmd *cobra.Command) error {
	r := o.runFlags.start(cmd)
	defer r.stop()
	ctx := r.ctx
	ws := check.NewWorkspace()
	defer ws.Close()
	progress.Report(r.sink, progress.Event{Stage: progress.Reading})
	reqs, err := loadCheckRequests(ctx, cmd, ws, &o.clusterFlags, &o.renderFlags, o.args, o.ref, o.kubeconfig, o.kubeContext)
	if err != nil {
		return readError(r, err)
	}
	var checked []manifest.Object
	for _, req := range reqs {
		checked = append(append(checked, req.Input.Repository...), req.Input.Cluster...)
	}
	// Lint reads the same objects and no result of the check: it runs
	// beside the simulations. It is quick and bounded by the input, so it
	// runs to its end even when the time limit cuts the simulations short,
	// and the report is whole.
	lintCtx, stopLint := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLint()
	linted := make(chan lintOutcome, 1)
	go func() { linted <- lintChecked(lintCtx, checked) }()
	var outcome *check.Outcome
	for _, req := range reqs {
		req.Options.Simulation = simulate.Options{Window: o.window, MaxRounds: o.rounds}
		req.Options.Progress = r.sink
		req.Verify = !o.noVerify
		got, err := check.Run(ctx, req)
		if err != nil {
			return readError(r, err)
		}
		if outcome == nil {
			outcome = got
		} else {
			outcome.Report.Runs = append(outcome.Report.Runs, got.Report.Runs...)
			outcome.Report.Findings = append(outcome.Report.Findings, got.Report.Findings...)
		}
	}
	addLintFindings(outcome.Report, <-linted)
	r.stop()
	var engines []admission.PolicyEngine
	for _, req := range reqs {
		engines = append(engines, req.Options.Admission.Engines...)
	}
	outcome.Report.Findings = append(outcome.Report.Findings, engineFindings(engines)...)
	if err := o.print(cmd, outcome.Report); err != nil {
		return err
	}
	if r.timedOut() {
		return r.result(nil)
	}
	if outcome.Report.Failed() {
		return exitError{exitFound}
	}
	return nil
}

func (o *checkOptions) print(cmd *cobra.Command, r *treport.Report) error {
	write := func(w io.Writer) error {
		switch o.format {
		case "text":
			color, err := useColor(o.color, w)
			if err != nil {
				return err
			}
			return treport.WriteText(w, r, treport.TextOptions{Color: color, Verbose: o.verbose})
		case "json":
			return treport.WriteJSON(w, r)
		case "sarif":
			return treport.WriteSARIF(w, r, version())
		case "junit":
			return treport.WriteJUnit(w, r)
		case "html":
			return treport.WriteHTML(w, r)
		}
		return fmt.Errorf("unknown --format %q (want %s)", o.format, checkFormats)
	}
	if o.output == "" {
		return write(cmd.OutOrStdout())
	}
	var b strings.Builder
	if err := write(&b); err != nil {
		return err
	}
	return yamledit.WriteFileAtomic(o.output, []byte(b.String()))
}

// loadCheckRequest reads the repository, the cluster (-c, or the live
// cluster of --kubeconfig) and the admission options, and says where they
// came from for verifying fixes.
func loadCheckRequest(ctx context.Context, cmd *cobra.Command, cf *clusterFlags, rf *renderFlags, args []string, ref, kubeconfig, kubeContext string) (check.Request, error) {
	_, aopts, clusterObjs, err := cf.load(ctx)
	if err != nil {
		return check.Request{}, err
	}
	repoObjs, err := loadArgs(ctx, cmd, rf, args, ref)
	if err != nil {
		return check.Request{}, err
	}
	if len(repoObjs) == 0 {
		return check.Request{}, fmt.Errorf("no manifests found in %s", strings.Join(args, ", "))
	}
	live := kubeconfig != "" || kubeContext != ""
	if live {
		if clusterObjs, err = readLiveCluster(ctx, kubeconfig, kubeContext, repoObjs); err != nil {
			return check.Request{}, err
		}
	}
	if aopts.Engines, err = policyEngines(clusterObjs, repoObjs); err != nil {
		return check.Request{}, err
	}
	return check.Request{
		Input:   check.Input{Repository: repoObjs, Cluster: clusterObjs},
		Sources: check.Sources{Repository: args, Cluster: cf.cluster, Live: live},
		Options: check.Options{Admission: aopts},
	}, nil
}

// lintOutcome is what truce lint found on a check's objects.
type lintOutcome struct {
	findings []lint.Finding
	err      error
}

// lintChecked runs truce lint on the objects a check reads (the loop rule is
// what the check itself reports).
func lintChecked(ctx context.Context, objs []manifest.Object) lintOutcome {
	findings, err := lint.Run(ctx, &lint.Input{Objects: objs}, lint.Options{Disable: []string{lint.RuleAdmissionGitOpsLoop}})
	return lintOutcome{findings: findings, err: err}
}

// addLintFindings adds truce lint's findings on the same objects to the
// report's findings, except those the check reported already. Lint runs
// on a context only the end of the command cancels, so an error is lint's
// refusal: the check's own verdicts stand without its findings.
func addLintFindings(r *treport.Report, l lintOutcome) {
	if l.err != nil {
		r.Findings = append(r.Findings, treport.Finding{Message: "truce lint could not run on these files: " + l.err.Error()})
		return
	}
	for _, f := range l.findings {
		source := f.Source
		if source == "" {
			source = f.Object
		}
		if reportedByCheck(r.Findings, source, f) {
			continue
		}
		r.Findings = append(r.Findings, treport.Finding{Source: source,
			Message: fmt.Sprintf("%s %s: %s. Fix: %s", f.Severity, f.Rule, f.Message, f.Fix)})
	}
}

// reportedByCheck reports whether the check's own ignore-rule findings
// (an Argo CD jsonPointers entry that has no effect on the repository's
// objects, or that names a list item by position) already name the entry
// f is about (f.Pointer), so that it is not shown twice.
func reportedByCheck(existing []treport.Finding, source string, f lint.Finding) bool {
	if f.Pointer == "" {
		return false
	}
	// drift/ignore names the entry so in its messages.
	entry := fmt.Sprintf("jsonPointers entry %q", f.Pointer)
	for _, e := range existing {
		if e.Source == source && strings.Contains(e.Message, entry) {
			return true
		}
	}
	return false
}

// loadArgs loads directories, files and Git arguments, the latter with
// the credentials of --git-secret.
func loadArgs(ctx context.Context, cmd *cobra.Command, rf *renderFlags, args []string, ref string) ([]manifest.Object, error) {
	if err := rf.validateGit(); err != nil {
		return nil, err
	}
	lopts, err := rf.limits.options()
	if err != nil {
		return nil, err
	}
	lopts.Stdin = cmd.InOrStdin()
	var objs []manifest.Object
	for _, arg := range args {
		if src, ok := manifest.ParseGitArg(arg); ok {
			if ref != "" {
				src.Ref = ref
			}
			auth, err := rf.gitAuth(src.URL)
			if err != nil {
				return nil, err
			}
			src.Auth = auth
			got, _, err := manifest.LoadGit(ctx, src, lopts)
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
			continue
		}
		got, err := manifest.LoadPaths(ctx, []string{arg}, lopts)
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	return objs, nil
}
