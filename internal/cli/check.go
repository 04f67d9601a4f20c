package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/lint"
	"github.com/truce-dev/truce/manifest"
	treport "github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

type checkOptions struct {
	clusterFlags
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
For every problem it proposes fixes in the seeds' order of preference (put the
mutation in Git, switch mutate to validate, Argo CD server-side diff with
IncludeMutationWebhook, a narrow ignore rule), and verifies each by simulating
again with the fix applied. 'truce fix' writes the chosen one.

Without Argo CD or Flux settings in the repository, both tools are simulated
with their defaults (Argo CD: automated sync, self-heal, prune; Flux: every
10 minutes).

Exit status: 0 everything settles, 1 something loops, is rejected, pruned or
stays OutOfSync, 2 error.`,
		Example: `  # The seeds' image-mirror loop, and its fix
  truce check examples/image-mirror

  # For CI: SARIF for code scanning, JUnit for the test view
  truce check ./deploy -c ./cluster --format sarif > truce.sarif
  truce check ./deploy -c ./cluster --format junit > truce.xml

  # A page to look at
  truce check examples/hpa-flux --format html > report.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			outcome, err := runCheck(cmd.Context(), cmd, &o.clusterFlags, args, o.ref, o.kubeconfig, o.kubeContext, simulate.Options{Window: o.window, MaxRounds: o.rounds}, !o.noVerify)
			if err != nil {
				return err
			}
			if err := o.print(cmd, outcome.Report); err != nil {
				return err
			}
			if outcome.Report.Failed() {
				return exitError{exitFound}
			}
			return nil
		},
	}
	f := cmd.Flags()
	o.clusterFlags.register(f)
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

// runCheck loads the repository and the cluster and runs the check, with a
// loader that verifies fixes on a copy of the inputs.
func runCheck(ctx context.Context, cmd *cobra.Command, cf *clusterFlags, args []string, ref, kubeconfig, kubeContext string, sim simulate.Options, verify bool) (*check.Outcome, error) {
	_, aopts, clusterObjs, err := cf.load(ctx)
	if err != nil {
		return nil, err
	}
	repoObjs, err := loadArgs(ctx, cmd, args, ref)
	if err != nil {
		return nil, err
	}
	if len(repoObjs) == 0 {
		return nil, fmt.Errorf("no manifests found in %s", strings.Join(args, ", "))
	}
	if kubeconfig != "" || kubeContext != "" {
		if len(cf.cluster) > 0 {
			return nil, fmt.Errorf("--kubeconfig reads the cluster; -c describes one: use one or the other")
		}
		if clusterObjs, err = readLiveCluster(ctx, kubeconfig, kubeContext, repoObjs); err != nil {
			return nil, err
		}
	}
	in := check.Input{Repository: repoObjs, Cluster: clusterObjs}
	var loader check.Loader
	if verify {
		loader = overlayLoader(cmd, args, cf.cluster, repoObjs, clusterObjs, kubeconfig != "" || kubeContext != "")
	}
	var read fix.Reader
	for _, a := range args {
		if _, ok := manifest.ParseGitArg(a); ok {
			// Fixes are edits of a working tree.
			read = func(path string) ([]byte, error) {
				if _, err := os.Stat(path); err != nil {
					return nil, fmt.Errorf("%s is read from Git; run truce check on a clone to get fixes as edits", path)
				}
				return os.ReadFile(path)
			}
		}
	}
	out, err := check.Check(ctx, in, check.Options{Admission: aopts, Simulation: sim}, loader, read)
	if err != nil {
		return nil, err
	}
	out.Report.Repository = strings.Join(args, " ")
	if err := addLintFindings(ctx, out.Report, append(append([]manifest.Object{}, repoObjs...), clusterObjs...)); err != nil {
		return nil, err
	}
	return out, nil
}

// addLintFindings adds truce lint's findings on the same objects to the
// report's findings (the loop rule is what the check itself reports).
func addLintFindings(ctx context.Context, r *treport.Report, objs []manifest.Object) error {
	findings, err := lint.Run(ctx, &lint.Input{Objects: objs}, lint.Options{Disable: []string{lint.RuleAdmissionGitOpsLoop}})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// The check's own verdicts stand without the lint findings.
		r.Findings = append(r.Findings, treport.Finding{Message: "truce lint could not run on these files: " + err.Error()})
		return nil
	}
	for _, f := range findings {
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
	return nil
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

// loadArgs loads directories, files and Git arguments.
func loadArgs(ctx context.Context, cmd *cobra.Command, args []string, ref string) ([]manifest.Object, error) {
	lopts := manifest.DefaultOptions()
	lopts.Stdin = cmd.InOrStdin()
	var objs []manifest.Object
	for _, arg := range args {
		if src, ok := manifest.ParseGitArg(arg); ok {
			if ref != "" {
				src.Ref = ref
			}
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

// overlayLoader verifies a fix. Plain manifest files the fix rewrites or
// creates are decoded from the fix's bytes and replace what was loaded
// from them; everything else is reused as loaded. When a fix touches what
// kustomize renders (a kustomization, or a file one uses), the inputs are
// copied to a temporary directory, the fix's files written over the copy,
// and everything is loaded from there.
func overlayLoader(cmd *cobra.Command, args, clusterPaths []string, repoObjs, clusterObjs []manifest.Object, live bool) check.Loader {
	return func(ctx context.Context, overlay map[string][]byte) (check.Input, error) {
		for _, a := range args {
			if _, ok := manifest.ParseGitArg(a); ok {
				return check.Input{}, fmt.Errorf("fixes of a Git source are verified on a working tree: clone it and check the directory")
			}
		}
		if len(overlay) == 0 && repoObjs != nil {
			return check.Input{Repository: repoObjs, Cluster: clusterObjs}, nil
		}
		if in, ok, err := replaceFiles(overlay, args, clusterPaths, repoObjs, clusterObjs, live); ok || err != nil {
			return in, err
		}
		return copyAndLoad(ctx, cmd, overlay, args, clusterPaths, clusterObjs, live)
	}
}

// replaceFiles is the fast way of overlayLoader: ok is false when a file
// of the overlay is rendered by kustomize.
func replaceFiles(overlay map[string][]byte, args, clusterPaths []string, repoObjs, clusterObjs []manifest.Object, live bool) (check.Input, bool, error) {
	if repoObjs == nil {
		return check.Input{}, false, nil
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	changed := map[string]bool{}
	for p := range overlay {
		base := filepath.Base(p)
		if base == "kustomization.yaml" || base == "kustomization.yml" || base == "Kustomization" {
			return check.Input{}, false, nil
		}
		changed[abs(p)] = true
	}
	for _, objs := range [][]manifest.Object{repoObjs, clusterObjs} {
		for _, o := range objs {
			if o.Source.Kustomization == "" {
				continue
			}
			if changed[abs(o.Source.File)] {
				return check.Input{}, false, nil
			}
			kdir := filepath.Dir(abs(o.Source.Kustomization)) + string(filepath.Separator)
			for p := range changed {
				if strings.HasPrefix(p, kdir) {
					return check.Input{}, false, nil
				}
			}
		}
	}
	keep := func(objs []manifest.Object) []manifest.Object {
		var out []manifest.Object
		for _, o := range objs {
			if !changed[abs(o.Source.File)] {
				out = append(out, o)
			}
		}
		return out
	}
	repo, cl := keep(repoObjs), clusterObjs
	if !live {
		cl = keep(clusterObjs)
	}
	under := func(p string, roots []string) bool {
		for _, r := range roots {
			ra := abs(r)
			if p == ra || strings.HasPrefix(p, ra+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	paths := make([]string, 0, len(overlay))
	for p := range overlay {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		objs, err := manifest.Decode(p, bytes.NewReader(overlay[p]), manifest.DefaultOptions())
		if err != nil {
			return check.Input{}, true, err
		}
		switch {
		case under(abs(p), args):
			repo = append(repo, objs...)
		case under(abs(p), clusterPaths) && !live:
			cl = append(cl, objs...)
		default:
			return check.Input{}, true, fmt.Errorf("%s is outside the paths checked", p)
		}
	}
	return check.Input{Repository: repo, Cluster: cl}, true, nil
}

// copyAndLoad loads the inputs from a temporary copy with the overlay
// written over it.
func copyAndLoad(ctx context.Context, cmd *cobra.Command, overlay map[string][]byte, args, clusterPaths []string, liveCluster []manifest.Object, live bool) (check.Input, error) {
	tmp, err := os.MkdirTemp("", "truce-verify-")
	if err != nil {
		return check.Input{}, err
	}
	defer os.RemoveAll(tmp)
	mapped := func(paths []string, prefix string) ([]string, map[string]string, error) {
		out := make([]string, len(paths))
		roots := map[string]string{}
		for i, p := range paths {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, nil, err
			}
			dst := filepath.Join(tmp, fmt.Sprintf("%s%d", prefix, i), filepath.Base(abs))
			if err := copyTree(abs, dst); err != nil {
				return nil, nil, fmt.Errorf("copying %s to verify a fix: %w", p, err)
			}
			out[i] = dst
			roots[abs] = dst
		}
		return out, roots, nil
	}
	repoPaths, repoRoots, err := mapped(args, "repo")
	if err != nil {
		return check.Input{}, err
	}
	cPaths, cRoots, err := mapped(clusterPaths, "cluster")
	if err != nil {
		return check.Input{}, err
	}
	for path, data := range overlay {
		dst, err := mapInto(path, repoRoots, cRoots)
		if err != nil {
			return check.Input{}, err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return check.Input{}, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return check.Input{}, err
		}
	}
	repoObjs, err := loadArgs(ctx, cmd, repoPaths, "")
	if err != nil {
		return check.Input{}, err
	}
	clusterObjs := liveCluster
	if !live {
		if clusterObjs, err = manifest.LoadPaths(ctx, cPaths, manifest.DefaultOptions()); err != nil {
			return check.Input{}, err
		}
	}
	return check.Input{Repository: repoObjs, Cluster: clusterObjs}, nil
}

// mapInto finds where a file of the inputs lives in the copy.
func mapInto(path string, rootsList ...map[string]string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for _, roots := range rootsList {
		for src, dst := range roots {
			if abs == src {
				return dst, nil
			}
			if rel, err := filepath.Rel(src, abs); err == nil && !strings.HasPrefix(rel, "..") {
				return filepath.Join(dst, rel), nil
			}
		}
	}
	return "", fmt.Errorf("%s is outside the paths checked", path)
}

// copyTree copies regular files and directories (not .git, not symlinks
// leading out) from src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if d.Name() == ".git" && p != src {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		}
		return nil
	})
}
