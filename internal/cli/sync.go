package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/syncer"
)

// syncOptions are truce sync's flags: the sync's options (package
// syncer) and what only the command has, its output, the files it reads
// ignore rules from and the in-process cluster's objects (-c).
type syncOptions struct {
	syncer.Options
	clusterFlags
	limitFlags
	output      string
	ignoreFiles []string
	// interval and leaderElect are the flags' values; the sync's options
	// take them only when they were given.
	interval    time.Duration
	leaderElect bool

	// mem, when set, is the in-process cluster to rehearse against
	// instead of one built from -c (tests run passes on one cluster).
	mem *memory.Cluster
}

func newSyncCommand() *cobra.Command { return newSyncCommandWith(&syncOptions{}) }

func newSyncCommandWith(o *syncOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync SOURCE",
		Short: "Reconcile a Git repository into the cluster, told about admission",
		Long: `sync applies the objects of a Git revision to the cluster with server-side apply,
as Flux's kustomize-controller does, and keeps them there — but it is told about
admission and about the other writers of each object: drift is what the API
server would store (a server-side apply dry run, or truce's offline admission
chain), ignore rules strip or adopt fields (Flux semantics), a field truce has
to write back again and again is contested (truce stops writing it, names the
other writer and the fix) — unless people write it: edits by kubectl (field
managers kubectl and kubectl-*) and the --human-field-manager tools are written
back on every pass and never contested — and prune deletes only what truce
applied and left Git.

SOURCE is a Git URL (https://, ssh://, git@host:path, file://, http://) with an
optional //sub/path and ?ref=branch-tag-or-commit, or the path of a local
repository (its commits are read, not the work tree).

The path is read as Argo CD detects a source's type: a directory with a
Chart.yaml is a Helm chart, rendered as helm template renders it (--helm-*;
dependencies from charts/ or pulled into --cache-dir, which needs the network);
a directory with .jsonnet files is read as an Argo CD directory source, its
Jsonnet evaluated (--jsonnet-*); anything else is plain YAML or a kustomization.
HelmRelease and Application objects are applied as they are: helm-controller or
Argo CD renders them. A source that fails to render fails the pass: nothing is
applied or pruned.

A private repository's credentials come from --git-secret DIR, a directory laid
out like a Flux GitRepository's secret mounted as a volume: for https:// URLs
the files username and password (HTTP basic authentication; a token goes in
password) or bearerToken; for SSH URLs identity (a PEM private key), password
(its passphrase, if any) and known_hosts, which is required. The files are read
again before every pass, so a rotated secret is picked up without a restart.
Credentials are not sent over plain http:// without --git-insecure-http.

Before cloning, each pass asks the remote which commit the ref names (one
ls-remote); when it is the commit of the last pass, the objects read then are
used again and nothing is cloned.

With --once it runs one pass and prints what it did per object. Otherwise it
runs a pass every --interval, sooner after a pass that wrote or failed
(self-heal backoff), with leader election, /healthz and /readyz on
--health-addr, /metrics on --metrics-addr and JSON logs on stderr.

The cluster is the one of --kubeconfig/--context or, with --in-cluster, the
one the pod runs in; without them (or with --memory) the pass is a rehearsal
against the in-process cluster holding the objects of -c. The state that must
survive a restart (what was applied, for prune; the contested fields) is kept
in the status of a GitSync object (--status gitsync, needs the CRD of
deploy/sync/crd.yaml); kubectl get gitsync shows it.

Exit status of --once: 0 synced, 1 drift remains (--dry-run) or a field is
contested, 2 error.`,
		Example: `  # Rehearse against the in-process cluster: what would be created?
  truce sync ./fleet//apps/shop --once -c cluster/

  # One pass against a real cluster, without writing
  truce sync 'https://github.com/org/fleet//apps/shop?ref=main' --once --dry-run --kubeconfig ~/.kube/config

  # The controller, as deploy/sync runs it
  truce sync https://github.com/org/fleet//apps/shop --in-cluster --interval 1m --prune --name shop

  # A Helm chart with a values file and a value set
  truce sync ./fleet//charts/shop --once --helm-values values-prod.yaml --helm-set image.tag=1.4.2

  # A private repository over SSH, with a Flux Git secret mounted at /etc/git
  truce sync 'ssh://git@github.com/org/fleet//apps/shop?ref=main' --git-secret /etc/git --in-cluster --prune --name shop`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(cmd, args[0])
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd)
		},
	}
	def := syncer.DefaultOptions()
	f := cmd.Flags()
	o.clusterFlags.register(f)
	o.limitFlags.register(f)
	o.clusterFlags.limits = &o.limitFlags
	f.StringVar(&o.Ref, "ref", "", "the branch, tag or commit to sync (default: SOURCE's ?ref=, else HEAD)")
	f.StringVar(&o.Path, "path", "", "the directory or file inside the repository (default: SOURCE's //path, else the root)")
	f.BoolVar(&o.Once, "once", false, "run one pass, print what it did and exit")
	f.DurationVar(&o.interval, "interval", syncer.DefaultInterval, "time between passes that find nothing to correct (the default mode when --once is not given)")
	f.BoolVar(&o.DryRun, "dry-run", false, "compute everything, write nothing (no apply, no delete, no status)")
	f.BoolVar(&o.Prune, "prune", false, "delete objects truce applied that left Git (needs --status gitsync to remember them)")
	f.BoolVar(&o.Force, "force", def.Force, "take over fields other field managers own (server-side apply force), as Flux does")
	f.StringVar(&o.Drift, "drift", def.Drift, "how the stored result of an apply is predicted: server (a dry run through the API server's admission) or offline (truce's admission chain)")
	f.StringSliceVar(&o.Admission, "admission", nil, "files or directories of admission configuration (policies, bindings, webhook configurations) for --drift offline, instead of the cluster's")
	f.StringSliceVar(&o.ignoreFiles, "ignore", nil, "a Flux Kustomization (spec.ignore) or Argo CD Application (spec.ignoreDifferences) whose ignore rules apply (repeatable)")
	f.IntVar(&o.Loop.Threshold, "loop-threshold", def.Loop.Threshold, "changes of a field truce wrote, within --loop-window, after which it is contested and no longer written; 0 turns the loop breaker off")
	f.DurationVar(&o.Loop.Window, "loop-window", def.Loop.Window, "how far back changes count for --loop-threshold")
	f.StringSliceVar(&o.Loop.HumanFieldManagers, "human-field-manager", nil, "a field manager whose writes are people's edits, as kubectl's (kubectl, kubectl-*) are: they are written back on every pass and never contested; matches the managers that start with it, as Flux's --override-manager (repeatable; e.g. k9s)")
	f.DurationVar(&o.Backoff.Initial, "backoff-initial", def.Backoff.Initial, "the wait after a pass that wrote or failed")
	f.Float64Var(&o.Backoff.Factor, "backoff-factor", def.Backoff.Factor, "the factor the wait grows by with every such pass in a row")
	f.DurationVar(&o.Backoff.Max, "backoff-max", def.Backoff.Max, "the longest wait")
	f.StringVar(&o.Name, "name", def.Name, "the sync's name: its GitSync object, its tracking ids, its lease")
	f.StringVar(&o.Namespace, "namespace", def.Namespace, "the namespace of the GitSync object, the lease and the events about cluster-scoped objects")
	f.StringVar(&o.Status, "status", def.Status, "where the state and the status are kept: gitsync (the GitSync object; needs the CRD) or none (in memory: no prune)")
	f.BoolVar(&o.Memory, "memory", false, "rehearse against the in-process cluster holding -c (the default without --kubeconfig, --context or --in-cluster)")
	f.BoolVar(&o.InCluster, "in-cluster", false, "sync the cluster the pod runs in, with its service account")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "sync the cluster of this kubeconfig")
	f.StringVar(&o.Context, "context", "", "the kubeconfig context")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "take turns with other replicas through a Lease (default: on with --in-cluster and --interval)")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", "", "the Lease's name (default: truce-sync-NAME)")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "the Lease's namespace (default: --namespace)")
	f.StringVar(&o.HealthAddr, "health-addr", def.HealthAddr, "address serving /healthz and /readyz; 0 to disable")
	f.StringVar(&o.MetricsAddr, "metrics-addr", def.MetricsAddr, "address serving /metrics; 0 to disable")
	f.StringVarP(&o.output, "output", "o", "text", "output of --once: text or json")
	f.DurationVar(&o.Timeout, "timeout", def.Timeout, "bound of one pass; 0 for none")
	f.DurationVar(&o.ShutdownGrace, "shutdown-grace", def.ShutdownGrace, "on SIGTERM, how long the pass in progress may take to finish before it is cancelled")
	f.StringVar(&o.GitSecret, "git-secret", "", "a directory holding SOURCE's credentials as a mounted Flux Git secret: username and password, or bearerToken (https://); identity, known_hosts and password, the key's passphrase (SSH); read before every pass")
	f.BoolVar(&o.GitInsecureHTTP, "git-insecure-http", false, "send --git-secret's credentials to a plain http:// SOURCE, in clear text")
	r := &o.Render
	f.StringVar(&r.HelmReleaseName, "helm-release-name", "", "a Helm chart's release name (default: --name)")
	f.StringVar(&r.HelmNamespace, "helm-namespace", "", "a Helm chart's release namespace, where its objects without a namespace go (default: --namespace)")
	f.StringArrayVar(&r.HelmValues, "helm-values", nil, "a values file of the Helm chart, relative to the chart directory (/-prefixed: to the repository's top), as Argo CD's valueFiles (repeatable)")
	f.StringArrayVar(&r.HelmSet, "helm-set", nil, "key=value for the Helm chart, as helm --set; the value is one string, as an Argo CD parameter (repeatable)")
	f.StringArrayVar(&r.JsonnetExtVars, "jsonnet-ext-var", nil, "name=value, a string external variable (std.extVar) for the Jsonnet files (repeatable)")
	f.StringArrayVar(&r.JsonnetTLAs, "jsonnet-tla", nil, "name=value, a string top-level argument for the Jsonnet files (repeatable)")
	f.StringArrayVar(&r.JsonnetLibs, "jsonnet-lib", nil, "a Jsonnet library directory, from the repository's top (repeatable)")
	f.StringVar(&r.RegistryConfig, "registry-config", "", "the OCI registry credentials file for the Helm chart's dependencies, as helm registry login writes it (default: Helm's registry config, then Docker's config.json); read on every pass")
	f.StringVar(&r.RepositoryConfig, "repository-config", "", "a Helm repositories file (repositories.yaml) giving the HTTP chart repositories of the chart's dependencies their credentials, by URL; read on every pass")
	f.StringVar(&r.CacheDir, "cache-dir", "", "where pulled Helm chart dependencies are kept (default: truce under the user's cache directory)")
	return cmd
}

// Complete takes the flags into the sync's options: SOURCE, the flags
// whose defaults depend on others when they were given, the in-process
// cluster of -c, and the ignore rules of --ignore.
func (o *syncOptions) Complete(cmd *cobra.Command, source string) {
	flags := cmd.Flags()
	o.Source = source
	if flags.Changed("interval") {
		o.Interval = &o.interval
	}
	if flags.Changed("leader-elect") {
		o.LeaderElect = &o.leaderElect
	}
	o.InProcessObjects = len(o.cluster) > 0
	o.InProcess = o.inProcess
	files := o.ignoreFiles
	o.Rules = func(ctx context.Context) ([]ignore.Rule, error) { return loadIgnoreRules(ctx, files) }
	o.Log = cmd.ErrOrStderr()
	o.Options.Complete()
}

// Validate checks the output format, then the sync's options.
func (o *syncOptions) Validate() error {
	switch o.output {
	case "text", "json":
	default:
		return fmt.Errorf("unknown output format %q (want text or json)", o.output)
	}
	var err error
	if o.Manifest, err = o.limitFlags.options(); err != nil {
		return err
	}
	return o.Options.Validate()
}

// Run opens the sync and runs one pass, printing what it did, or the
// controller.
func (o *syncOptions) Run(ctx context.Context, cmd *cobra.Command) error {
	s, err := o.Open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if !o.Once {
		return s.Serve(ctx)
	}
	res, err := s.Once(ctx)
	if err != nil {
		if o.output == "json" {
			_ = writeSyncJSON(cmd.OutOrStdout(), syncReport{Source: s.Source(), Error: err.Error()})
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
		return exitError{exitFailure}
	}
	rep := syncReport{Result: res, Source: s.Source(), Synced: res.Synced(), Drifted: res.Drifted()}
	var werr error
	if o.output == "json" {
		werr = writeSyncJSON(cmd.OutOrStdout(), rep)
	} else {
		werr = writeSyncText(cmd.OutOrStdout(), rep, s.InProcess())
	}
	if werr != nil {
		return werr
	}
	switch {
	case len(res.Errors) > 0:
		return exitError{exitFailure}
	case len(res.Contested) > 0, o.DryRun && res.Drifted():
		return exitError{exitFound}
	}
	return nil
}

// inProcess is the in-process cluster of a rehearsal: the one a test
// gave, or one holding the objects of -c.
func (o *syncOptions) inProcess(ctx context.Context) (cluster.Cluster, func(), error) {
	if o.mem != nil {
		return o.mem, nil, nil
	}
	state, aopts, objs, err := o.clusterFlags.load(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("-c: %w", err)
	}
	if aopts.Engines, err = policyEngines(objs); err != nil {
		return nil, nil, fmt.Errorf("-c: %w", err)
	}
	mem, err := memory.New(ctx, state, aopts)
	if err != nil {
		return nil, nil, admission.WithSource(err, objs)
	}
	return mem, mem.Close, nil
}

// loadIgnoreRules reads the ignore rules of Flux Kustomizations, Argo CD
// Applications, argocd-cm and resources' argocd.argoproj.io/ignore-differences
// annotations from each --ignore file, as gitops.Settings.ComparisonFor
// gives them to truce check and diff: Flux's, then Argo CD's, leaving out
// the rules argocd-cm only implies (truce sync never compares status).
func loadIgnoreRules(ctx context.Context, files []string) ([]ignore.Rule, error) {
	var rules []ignore.Rule
	for _, file := range files {
		objs, err := manifest.LoadPaths(ctx, []string{file}, manifest.DefaultOptions())
		if err != nil {
			return nil, fmt.Errorf("--ignore %s: %w", file, err)
		}
		in := make([]gitops.Object, len(objs))
		for i, m := range objs {
			in[i] = gitops.ObjectOf(m)
		}
		settings, _, err := gitops.Discover(in)
		if err != nil {
			return nil, fmt.Errorf("--ignore %s: %w", file, err)
		}
		found := len(settings.Kustomizations) + len(settings.Applications) + len(settings.ResourceRules)
		if settings.ArgoConfig != nil && settings.ArgoConfig.Position != (manifest.Source{}) {
			found++
		}
		if found == 0 {
			return nil, fmt.Errorf("--ignore %s: no Flux Kustomization, Argo CD Application, argocd-cm or ignore-differences annotation found to take ignore rules from", file)
		}
		for _, tool := range []ignore.Tool{ignore.Flux, ignore.ArgoCD} {
			for _, r := range settings.ComparisonFor(gitops.Unit{Tool: tool}).Rules {
				if !r.Implied {
					rules = append(rules, r)
				}
			}
		}
	}
	if _, err := ignore.Compile(rules, ignore.Options{}); err != nil {
		return nil, fmt.Errorf("--ignore: %w", err)
	}
	return rules, nil
}

// syncReport is the -o json document of truce sync --once: the pass's
// result, and the verdicts the exit status follows.
type syncReport struct {
	*reconcile.Result
	Source  string `json:"source"`
	Synced  bool   `json:"synced"`
	Drifted bool   `json:"drifted"`
	// Error is set when the pass could not run; the rest is then empty.
	Error string `json:"error,omitempty"`
}

func writeSyncJSON(w io.Writer, rep syncReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeSyncText(w io.Writer, rep syncReport, inProcess bool) error {
	res := rep.Result
	where := "the cluster"
	if inProcess {
		where = "the in-process cluster (a rehearsal)"
	}
	head := fmt.Sprintf("sync of %s at %s into %s", rep.Source, res.Revision, where)
	if res.DryRun {
		head += ", dry run: nothing written"
	}
	fmt.Fprintln(w, head)
	width := 0
	for _, o := range res.Objects {
		width = max(width, len(o.Ref.String()))
	}
	for _, o := range res.Objects {
		line := fmt.Sprintf("  %-10s  %-*s", o.Action, width, o.Ref.String())
		if o.Source != "" {
			line += "  " + o.Source
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		if len(o.Drifted) > 0 {
			fmt.Fprintf(w, "      drifted:   %s\n", strings.Join(o.Drifted, ", "))
		}
		for _, ig := range o.Ignored {
			p := ig.Pointer
			if p == "" {
				p = "(the whole object)"
			}
			fmt.Fprintf(w, "      ignored:   %s (%s) by %s\n", p, ig.Treatment, ig.Rule)
		}
		for _, e := range o.Reverted {
			done := "reverted"
			if res.DryRun {
				done = "a pass reverts it"
			}
			fmt.Fprintf(w, "      edited:    %s outside Git by field manager %s (%s): %s to Git's value\n",
				e.Pointer, e.Writer.Manager, e.Writer.Operation, done)
		}
		for _, c := range o.Contested {
			fmt.Fprintf(w, "      contested: %s: %s changed it back %d times since %s; truce no longer writes it\n",
				c.Pointer, c.Writer, c.Changes, c.Since.UTC().Format(time.RFC3339))
			if c.Fix.Kind != "" {
				fmt.Fprintf(w, "                 fix (%s): %s\n", c.Fix.Kind, c.Fix.Description)
			}
		}
		if o.Error != "" {
			fmt.Fprintf(w, "      error:     %s\n", o.Error)
		}
		if o.Note != "" {
			fmt.Fprintf(w, "      note:      %s\n", o.Note)
		}
	}
	perObject := map[string]bool{}
	for _, o := range res.Objects {
		if o.Error != "" {
			perObject[fmt.Sprintf("%s: %s", o.Ref, o.Error)] = true
		}
	}
	for _, e := range res.Errors {
		if !perObject[e] {
			fmt.Fprintf(w, "  error: %s\n", e)
		}
	}
	verdict := "synced"
	switch {
	case len(res.Errors) > 0:
		verdict = "failed"
	case len(res.Contested) > 0:
		verdict = "contested"
	case res.DryRun && res.Drifted():
		verdict = "drift: a pass would write"
	}
	fmt.Fprintf(w, "%d created, %d configured, %d unchanged, %d pruned, %d skipped, %d failed; %s; %d writes in %s: %s\n",
		res.Count(reconcile.Created), res.Count(reconcile.Configured), res.Count(reconcile.Unchanged), len(res.Pruned),
		res.Count(reconcile.Skipped), res.Count(reconcile.Failed), fieldsContested(len(res.Contested)), res.Writes,
		res.Duration.Round(time.Millisecond), verdict)
	return nil
}

func fieldsContested(n int) string {
	if n == 1 {
		return "1 field contested"
	}
	return fmt.Sprintf("%d fields contested", n)
}
