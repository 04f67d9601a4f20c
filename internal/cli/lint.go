package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/lint"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/progress"
)

type lintOptions struct {
	renderFlags
	limitFlags
	runFlags
	kubeconfig  string
	kubeContext string
	format      string
	disable     []string
	failOn      string
	maxTimeout  time.Duration
	listRules   bool
}

func newLintCommand() *cobra.Command {
	o := &lintOptions{}
	cmd := &cobra.Command{
		Use:   "lint [PATH...] [--kubeconfig K [--context C]]",
		Short: "Find the hazards of webhook configurations, admission policies and Argo CD settings before they break",
		Long: `lint checks admission configuration and GitOps settings for the known
ways they break a cluster or a sync: fail-closed webhooks that can block their
own restart or kube-system, webhooks on the control plane's Lease writes or on
everything, rules kube-apiserver never calls, timeouts the write path cannot
afford, sideEffects, implicit failurePolicy, objectSelector as an enforcement
boundary, admission policies without bindings (or bindings without policies or
params, or that never deny), and Argo CD ignore rules that ignore nothing,
ignore differences that syncs still overwrite, and label tracking next to
Kyverno generate.

PATH is a file or directory of manifests (recursive; kustomizations are
rendered; - for stdin). With --kubeconfig (or --context) the live cluster's
webhook configurations, admission policies and bindings, namespaces, Argo CD
Applications and argocd-cm, and Kyverno policies are read too (read only); an
object in PATH shadows its live version. Every rule is documented, with a bad
and a good example, in docs/lint.md.

Exit status: 0 no finding at or above --fail-on (default error), 1 some, 2 error.`,
		Example: `  # The admission configuration and Argo CD settings of a repository
  truce lint ./cluster ./argocd

  # A live cluster, for code scanning
  truce lint --kubeconfig ~/.kube/config --format sarif > lint.sarif

  # Warnings fail the build too; one rule off
  truce lint ./cluster --fail-on warning --disable webhook-failure-policy-unset`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.runFlags.validate(); err != nil {
				return err
			}
			r := o.runFlags.start(cmd)
			defer r.stop()
			return readError(r, runLint(r.ctx, cmd, o, args, r))
		},
	}
	f := cmd.Flags()
	o.renderFlags.register(f)
	o.limitFlags.register(f)
	o.runFlags.register(f)
	o.renderFlags.limits = &o.limitFlags
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "also lint the live cluster of this kubeconfig (read only)")
	f.StringVar(&o.kubeContext, "context", "", "the kubeconfig context (implies reading the live cluster)")
	f.StringVar(&o.format, "format", "text", "output format: text, json or sarif")
	f.StringSliceVar(&o.disable, "disable", nil, "a rule id not to run (repeatable, or comma-separated)")
	f.StringVar(&o.failOn, "fail-on", "error", "exit 1 when a finding is at least this severe: error, warning, info or none")
	f.DurationVar(&o.maxTimeout, "max-webhook-timeout", lint.DefaultMaxWebhookTimeout, "the longest a write may wait for a webhook, or for mutating webhooks called one after another")
	f.BoolVar(&o.listRules, "list-rules", false, "list the rules (id, severity, summary) and exit")
	return cmd
}

// runLint lints paths and the live cluster; r shows progress and ends
// before the findings are printed.
func runLint(ctx context.Context, cmd *cobra.Command, o *lintOptions, paths []string, r *longRun) error {
	out := cmd.OutOrStdout()
	if o.listRules {
		return printRules(out)
	}
	switch o.format {
	case "text", "json", "sarif":
	default:
		return fmt.Errorf("unknown --format %q (want text, json or sarif)", o.format)
	}
	threshold := 0
	if o.failOn != "none" {
		sev, err := lint.ParseSeverity(o.failOn)
		if err != nil {
			return fmt.Errorf("--fail-on: %w (or none)", err)
		}
		threshold = sev.Rank()
	}
	if o.maxTimeout <= 0 {
		return fmt.Errorf("--max-webhook-timeout must be positive, got %s", o.maxTimeout)
	}
	liveCluster := o.kubeconfig != "" || o.kubeContext != ""
	if len(paths) == 0 && !liveCluster {
		return fmt.Errorf("nothing to lint: give manifest paths, --kubeconfig, or both")
	}

	// Each cluster of the repository (render/world) is linted on its own,
	// with what its units render.
	inputs := [][]manifest.Object{nil}
	progress.Report(r.sink, progress.Event{Stage: progress.Reading})
	if len(paths) > 0 {
		worlds, ok, err := readWorlds(ctx, &o.renderFlags, paths)
		if err != nil {
			return err
		}
		if ok {
			inputs = inputs[:0]
			for _, w := range worlds {
				inputs = append(inputs, append(append([]manifest.Object(nil), w.Objects...), w.Base...))
			}
		} else {
			lopts, err := o.limitFlags.options()
			if err != nil {
				return err
			}
			lopts.Stdin = cmd.InOrStdin()
			files, err := manifest.LoadPaths(ctx, paths, lopts)
			if err != nil {
				return err
			}
			inputs[0] = files
		}
	}
	var findings []lint.Finding
	seen := map[string]bool{}
	for i, objs := range inputs {
		progress.Report(r.sink, progress.Event{Stage: progress.Linting, Done: i, Total: len(inputs), Objects: len(objs)})
		if liveCluster {
			liveObjs, err := readLintCluster(ctx, cmd.ErrOrStderr(), o.kubeconfig, o.kubeContext, objs)
			if err != nil {
				return err
			}
			objs = lint.WithLive(objs, liveObjs)
		}
		got, err := lint.Run(ctx, &lint.Input{Objects: objs}, lint.Options{Disable: o.disable, MaxWebhookTimeout: o.maxTimeout, Simulator: checkSimulator{}})
		if err != nil {
			return err
		}
		for _, f := range got {
			key := fmt.Sprintf("%+v", f)
			if !seen[key] {
				seen[key] = true
				findings = append(findings, f)
			}
		}
	}
	r.stop()
	var err error
	switch o.format {
	case "json":
		err = lint.WriteJSON(out, findings)
	case "sarif":
		var rules []lint.Rule
		for _, r := range lint.Rules() {
			if !slices.Contains(o.disable, r.ID) {
				rules = append(rules, r)
			}
		}
		err = lint.WriteSARIF(out, findings, rules, version())
	default:
		err = lint.WriteText(out, findings)
	}
	if err != nil {
		return fmt.Errorf("writing the findings: %w", err)
	}
	for _, f := range findings {
		if threshold > 0 && f.Severity.Rank() >= threshold {
			return exitError{exitFound}
		}
	}
	return nil
}

// checkSimulator is lint's Simulator: truce check's simulation, with the
// fixes unverified (lint reports a loop, check proves the fix).
type checkSimulator struct{}

// Simulate implements lint.Simulator with the objects check finds a
// problem with (every verdict but Synced).
func (checkSimulator) Simulate(ctx context.Context, repository, cluster []manifest.Object) ([]lint.Simulated, error) {
	engines, err := policyEngines(cluster, repository)
	if err != nil {
		return nil, err
	}
	out, err := check.Check(ctx, check.Input{Repository: repository, Cluster: cluster}, check.Options{Admission: admission.Options{Engines: engines}}, nil, nil)
	if err != nil {
		return nil, err
	}
	sims := make([]lint.Simulated, 0, len(out.Problems))
	for _, p := range out.Problems {
		o := p.Problem.Object
		sim := lint.Simulated{Source: o.Source, Object: o.Ref.String(), Verdict: o.Verdict, Loop: o.Loop}
		fix := p.Chosen
		if fix == nil && len(p.Candidates) > 0 {
			fix = p.Candidates[0]
		}
		if fix != nil {
			sim.FixTitle, sim.FixDescription = fix.Title, fix.Description
		}
		sims = append(sims, sim)
	}
	return sims, nil
}

func printRules(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSEVERITY\tSUMMARY")
	for _, r := range lint.Rules() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.ID, r.Severity, r.Summary)
	}
	return tw.Flush()
}

// lintLiveKinds are what lint reads from a live cluster, all namespaces.
// Kinds the cluster does not serve (no Argo CD, no Kyverno) are skipped.
var lintLiveKinds = append(slices.Clone(admission.ConfigurationKinds), []k8sschema.GroupVersionKind{
	{Group: "", Version: "v1", Kind: "Namespace"},
	{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"},
	{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"},
	{Group: "kyverno.io", Version: "v1", Kind: "Policy"},
	{Group: "policies.kyverno.io", Version: "v1", Kind: "GeneratingPolicy"},
	{Group: "policies.kyverno.io", Version: "v1", Kind: "NamespacedGeneratingPolicy"},
}...)

// argoCDNamespace is where Argo CD's argocd-cm lives by default; the
// namespaces of the Applications found are tried too.
const argoCDNamespace = "argocd"

// readLintCluster reads, without writing anything, what the lint rules
// look at from a live cluster: the kinds of lintLiveKinds, argocd-cm, and the
// parameter objects the policy bindings refer to. Objects get Source.File
// lint.LiveSource. A kind the client may not list is skipped with a note on
// stderr, so that a read-only role limited to admission configuration can
// still lint it.
func readLintCluster(ctx context.Context, stderr io.Writer, kubeconfig, kubeContext string, files []manifest.Object) ([]manifest.Object, error) {
	cfg, err := live.Load(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	c, err := live.New(cfg)
	if err != nil {
		return nil, err
	}
	var out []manifest.Object
	add := func(objs ...*unstructured.Unstructured) {
		for _, o := range objs {
			out = append(out, manifest.Object{Source: manifest.Source{File: lint.LiveSource}, Object: o})
		}
	}
	list := func(gvk k8sschema.GroupVersionKind, namespace string) error {
		objs, err := c.List(ctx, gvk, namespace)
		switch {
		case noKind(err):
			return nil
		case apierrors.IsForbidden(err):
			fmt.Fprintf(stderr, "warning: not allowed to list %s in the cluster; the rules that read them do not see the live ones\n", gvk.Kind)
			return nil
		case err != nil:
			return fmt.Errorf("reading %s from the cluster: %w", gvk.Kind, err)
		}
		add(objs...)
		return nil
	}
	for _, gvk := range lintLiveKinds {
		if err := list(gvk, ""); err != nil {
			return nil, err
		}
	}

	// argocd-cm: next to Argo CD, which is where its Applications are in
	// the usual setup.
	namespaces := []string{argoCDNamespace}
	for _, o := range out {
		if o.Object.GetKind() == "Application" && !slices.Contains(namespaces, o.Object.GetNamespace()) {
			namespaces = append(namespaces, o.Object.GetNamespace())
		}
	}
	for _, ns := range namespaces {
		cm, err := c.Get(ctx, cluster.Ref{GroupVersionKind: k8sschema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: ns, Name: "argocd-cm"})
		switch {
		case noKind(err), apierrors.IsForbidden(err):
		case err != nil:
			return nil, fmt.Errorf("reading %s/argocd-cm from the cluster: %w", ns, err)
		default:
			add(cm)
		}
	}

	// The parameter objects of the bindings: in paramRef.namespace, or in
	// every namespace when the parameter is per request namespace.
	for _, ref := range paramRefs(append(append([]manifest.Object{}, files...), out...)) {
		if err := list(ref.gvk, ref.namespace); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type paramLocation struct {
	gvk       k8sschema.GroupVersionKind
	namespace string
}

// paramRefs returns the kinds and namespaces of the parameter objects the
// policy bindings among objs refer to, without duplicates.
func paramRefs(objs []manifest.Object) []paramLocation {
	paramKinds := map[string]k8sschema.GroupVersionKind{} // policy kind/name -> paramKind
	for _, o := range objs {
		kind := o.Object.GetKind()
		if o.Object.GroupVersionKind().Group != "admissionregistration.k8s.io" || !strings.HasSuffix(kind, "AdmissionPolicy") {
			continue
		}
		apiVersion, _, _ := unstructured.NestedString(o.Object.Object, "spec", "paramKind", "apiVersion")
		pk, _, _ := unstructured.NestedString(o.Object.Object, "spec", "paramKind", "kind")
		if pk == "" {
			continue
		}
		if gv, err := k8sschema.ParseGroupVersion(apiVersion); err == nil {
			paramKinds[kind+"/"+o.Object.GetName()] = gv.WithKind(pk)
		}
	}
	var out []paramLocation
	for _, o := range objs {
		kind := strings.TrimSuffix(o.Object.GetKind(), "Binding")
		if o.Object.GroupVersionKind().Group != "admissionregistration.k8s.io" || kind == o.Object.GetKind() {
			continue
		}
		policy, _, _ := unstructured.NestedString(o.Object.Object, "spec", "policyName")
		gvk, ok := paramKinds[kind+"/"+policy]
		if !ok {
			continue
		}
		if _, ok, _ := unstructured.NestedMap(o.Object.Object, "spec", "paramRef"); !ok {
			continue
		}
		ns, _, _ := unstructured.NestedString(o.Object.Object, "spec", "paramRef", "namespace")
		loc := paramLocation{gvk: gvk, namespace: ns}
		if !slices.Contains(out, loc) {
			out = append(out, loc)
		}
	}
	return out
}
