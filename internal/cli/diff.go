package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/progress"
	"github.com/truce-dev/truce/schema/toolkit"
)

type diffOptions struct {
	clusterFlags
	renderFlags
	limitFlags
	runFlags
	strategy    string
	output      string
	color       string
	kubeconfig  string
	kubeContext string
	ref         string
}

// Strategy names on the command line.
const (
	strategyAuto         = "auto"
	strategyArgoLegacy   = "argocd-legacy"
	strategyArgoSSD      = "argocd-ssd"
	strategyFlux         = "flux"
	strategyPredicted    = "predicted"
	strategyListForUsage = "auto, argocd-legacy, argocd-ssd, flux or predicted"
)

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff [PATH|GIT-URL]...",
		Short: "GitOps drift between Git and the cluster, as Argo CD or Flux computes it",
		Long: `diff compares the manifests of a directory or Git repository (plain YAML, or
rendered with kustomize where a kustomization is present) with the cluster, the
way a GitOps tool decides drift:

  argocd-legacy  Argo CD's default three-way diff of Git, live and the
                 last-applied-configuration annotation
  argocd-ssd     Argo CD's server-side diff: a server-side apply dry run per
                 resource (fields other managers own keep their live value
                 unless IncludeMutationWebhook=true)
  flux           kustomize-controller: a forced server-side apply dry run
                 compared with live, with Flux's normalisations and
                 spec.ignore rules (Flux's own library decides)
  predicted      Git against the object truce's offline admission chain
                 predicts will be stored, on the fields Git sets; no API call
  auto           flux when the repository has a Flux Kustomization,
                 argocd-ssd or argocd-legacy for an Argo CD Application (per
                 its compare options), predicted otherwise

The repository's own settings are read and honoured: Argo CD Applications
(ignoreDifferences, syncOptions, the compare-options annotation), argocd-cm
(resource.customizations.ignoreDifferences.*), the per-resource
argocd.argoproj.io/ignore-differences annotation, Flux Kustomizations
(spec.ignore). Ignore rules that do nothing are reported.

The cluster is the one of --kubeconfig/--context, or else the in-process
cluster (truce's admission chain with real server-side apply) holding the
objects of -c.

Exit status, as flux diff: 0 no drift, 1 drift, 2 error.`,
		Example: `  # Will Flux see drift once this is applied? (in-process cluster)
  truce diff examples/image-mirror/app -c examples/image-mirror/cluster --strategy flux

  # What admission will change in the fields Git sets, with no cluster at all
  truce diff examples/image-mirror/app -c examples/image-mirror/cluster --strategy predicted

  # Argo CD's view of a real cluster, as JSON
  truce diff ./deploy --kubeconfig ~/.kube/config --strategy argocd-legacy -o json

  # A Git repository at a tag, a sub-path of it
  truce diff 'https://example.com/org/repo//deploy/app?ref=v1.2.0'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd, o, args)
		},
	}
	f := cmd.Flags()
	o.clusterFlags.register(f)
	o.renderFlags.register(f)
	o.limitFlags.register(f)
	o.runFlags.register(f)
	o.clusterFlags.limits, o.renderFlags.limits = &o.limitFlags, &o.limitFlags
	f.StringVar(&o.strategy, "strategy", strategyAuto, "how drift is decided: "+strategyListForUsage)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.color, "color", "auto", "colour the text output: auto (when stdout is a terminal), always or never")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "compare with the cluster of this kubeconfig instead of the in-process one")
	f.StringVar(&o.kubeContext, "context", "", "the kubeconfig context")
	f.StringVar(&o.ref, "ref", "", "for a Git repository: the branch, tag or commit to read (default: its HEAD)")
	return cmd
}

func runDiff(cmd *cobra.Command, o *diffOptions, args []string) error {
	switch o.output {
	case "text", "json":
	default:
		return fmt.Errorf("unknown output format %q (want text or json)", o.output)
	}
	color, err := useColor(o.color, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	if err := o.runFlags.validate(); err != nil {
		return err
	}
	r := o.runFlags.start(cmd)
	defer r.stop()
	ctx := r.ctx
	progress.Report(r.sink, progress.Event{Stage: progress.Reading})
	repo, err := loadRepository(ctx, cmd, &o.renderFlags, args, o.ref)
	if err != nil {
		return readError(r, err)
	}
	if len(repo.manifests) == 0 {
		return fmt.Errorf("no manifests found in %s", strings.Join(args, ", "))
	}
	c, mem, closeCluster, err := o.openCluster(ctx, repo)
	if err != nil {
		return readError(r, err)
	}
	defer closeCluster()
	if mem != nil {
		repo.withoutUnknownKinds(mem.RESTMapper())
	}
	strategy, err := o.buildStrategy(ctx, repo, c, mem)
	if err != nil {
		return readError(r, err)
	}
	objs, err := drift.DiffAll(ctx, strategy, repo.objects(), r.sink)
	if oe := (*drift.ObjectError)(nil); errors.As(err, &oe) {
		return fmt.Errorf("%s: %w", repo.manifests[oe.Index].Source, oe.Err)
	}
	if err != nil {
		return err
	}
	r.stop()
	report := &diffReport{Strategy: strategy.Name(), Objects: objs, Findings: repo.findings}
	for i, m := range repo.manifests {
		objs[i].Source = m.Source.String()
	}
	if err := report.print(cmd.OutOrStdout(), o.output, color); err != nil {
		return err
	}
	if r.timedOut() {
		return exitError{exitFailure}
	}
	if report.drifted() {
		return exitError{exitFound}
	}
	return nil
}

// predictedOrder is the order the repository's GitOps tool applies a sync
// in, for the predicted strategy: Flux's stages with a Kustomization, Argo
// CD's sync order otherwise.
func predictedOrder(s *gitops.Settings) drift.Order {
	if len(s.Kustomizations) > 0 {
		return drift.FluxStages
	}
	return drift.ArgoSyncOrder
}

func useColor(mode string, out io.Writer) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		f, ok := out.(*os.File)
		return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == "", nil
	}
	return false, fmt.Errorf("unknown --color %q (want auto, always or never)", mode)
}

// openCluster returns the live cluster of --kubeconfig, or the in-process
// one seeded with -c and the CRDs of the GitOps tools' kinds the
// repository uses (which is also returned as mem).
func (o *diffOptions) openCluster(ctx context.Context, r *repository) (cluster.Cluster, *memory.Cluster, func(), error) {
	repo := r.objects()
	if o.kubeconfig != "" || o.kubeContext != "" {
		if len(o.cluster) > 0 {
			return nil, nil, nil, fmt.Errorf("--kubeconfig names a real cluster; -c describes an in-process one: use one or the other")
		}
		cfg, err := live.Load(o.kubeconfig, o.kubeContext)
		if err != nil {
			return nil, nil, nil, err
		}
		c, err := live.New(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		return c, nil, func() {}, nil
	}
	lopts, err := o.limitFlags.options()
	if err != nil {
		return nil, nil, nil, err
	}
	clusterObjs, err := manifest.LoadPaths(ctx, o.cluster, lopts)
	if err != nil {
		return nil, nil, nil, err
	}
	defined := append([]*unstructured.Unstructured(nil), repo...)
	for _, c := range clusterObjs {
		defined = append(defined, c.Object)
	}
	crds, err := toolkit.For(repo, defined)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, b := range r.base {
		crds = append(crds, b.Object.DeepCopy())
	}
	state, opts, clusterObjs, err := o.clusterFlags.load(ctx, crds...)
	if err != nil {
		return nil, nil, nil, err
	}
	if opts.Engines, err = policyEngines(clusterObjs, r.manifests); err != nil {
		return nil, nil, nil, err
	}
	mem, err := memory.New(ctx, state, opts)
	if err != nil {
		return nil, nil, nil, admission.WithSource(err, clusterObjs)
	}
	return mem, mem, mem.Close, nil
}
