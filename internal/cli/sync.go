package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	pathpkg "path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/controller"
	"github.com/truce-dev/truce/reconcile/gitsync"
)

type syncOptions struct {
	clusterFlags
	ref, path               string
	once                    bool
	interval                time.Duration
	dryRun, prune, force    bool
	drift                   string
	admission               []string
	ignoreFiles             []string
	loopThreshold           int
	loopWindow              time.Duration
	backoffInitial          time.Duration
	backoffFactor           float64
	backoffMax              time.Duration
	name, namespace         string
	status                  string
	memory, inCluster       bool
	kubeconfig, kubeContext string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	healthAddr, metricsAddr string
	output                  string
	timeout, shutdownGrace  time.Duration
	gitSecret               string
	gitInsecureHTTP         bool

	// mem, when set, is the in-process cluster to rehearse against
	// instead of one built from -c (tests run passes on one cluster).
	mem *memory.Cluster
}

// Status stores of truce sync.
const (
	statusGitSync = "gitsync"
	statusNone    = "none"
)

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
other writer and the fix), and prune deletes only what truce applied and left
Git.

SOURCE is a Git URL (https://, ssh://, git@host:path, file://, http://) with an
optional //sub/path and ?ref=branch-tag-or-commit, or the path of a local
repository (its commits are read, not the work tree).

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

  # A private repository over SSH, with a Flux Git secret mounted at /etc/git
  truce sync 'ssh://git@github.com/org/fleet//apps/shop?ref=main' --git-secret /etc/git --in-cluster --prune --name shop`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSync(cmd.Context(), cmd, o, args[0])
		},
	}
	def := reconcile.DefaultOptions()
	f := cmd.Flags()
	o.clusterFlags.register(f)
	f.StringVar(&o.ref, "ref", "", "the branch, tag or commit to sync (default: SOURCE's ?ref=, else HEAD)")
	f.StringVar(&o.path, "path", "", "the directory or file inside the repository (default: SOURCE's //path, else the root)")
	f.BoolVar(&o.once, "once", false, "run one pass, print what it did and exit")
	f.DurationVar(&o.interval, "interval", time.Minute, "time between passes that find nothing to correct (the default mode when --once is not given)")
	f.BoolVar(&o.dryRun, "dry-run", false, "compute everything, write nothing (no apply, no delete, no status)")
	f.BoolVar(&o.prune, "prune", false, "delete objects truce applied that left Git (needs --status gitsync to remember them)")
	f.BoolVar(&o.force, "force", def.Force, "take over fields other field managers own (server-side apply force), as Flux does")
	f.StringVar(&o.drift, "drift", string(def.Drift), "how the stored result of an apply is predicted: server (a dry run through the API server's admission) or offline (truce's admission chain)")
	f.StringSliceVar(&o.admission, "admission", nil, "files or directories of admission configuration (policies, bindings, webhook configurations) for --drift offline, instead of the cluster's")
	f.StringSliceVar(&o.ignoreFiles, "ignore", nil, "a Flux Kustomization (spec.ignore) or Argo CD Application (spec.ignoreDifferences) whose ignore rules apply (repeatable)")
	f.IntVar(&o.loopThreshold, "loop-threshold", def.Loop.Threshold, "changes of a field truce wrote, within --loop-window, after which it is contested and no longer written; 0 turns the loop breaker off")
	f.DurationVar(&o.loopWindow, "loop-window", def.Loop.Window, "how far back changes count for --loop-threshold")
	f.DurationVar(&o.backoffInitial, "backoff-initial", def.Backoff.Initial, "the wait after a pass that wrote or failed")
	f.Float64Var(&o.backoffFactor, "backoff-factor", def.Backoff.Factor, "the factor the wait grows by with every such pass in a row")
	f.DurationVar(&o.backoffMax, "backoff-max", def.Backoff.Max, "the longest wait")
	f.StringVar(&o.name, "name", def.Name, "the sync's name: its GitSync object, its tracking ids, its lease")
	f.StringVar(&o.namespace, "namespace", def.Namespace, "the namespace of the GitSync object, the lease and the events about cluster-scoped objects")
	f.StringVar(&o.status, "status", statusGitSync, "where the state and the status are kept: gitsync (the GitSync object; needs the CRD) or none (in memory: no prune)")
	f.BoolVar(&o.memory, "memory", false, "rehearse against the in-process cluster holding -c (the default without --kubeconfig, --context or --in-cluster)")
	f.BoolVar(&o.inCluster, "in-cluster", false, "sync the cluster the pod runs in, with its service account")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "sync the cluster of this kubeconfig")
	f.StringVar(&o.kubeContext, "context", "", "the kubeconfig context")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "take turns with other replicas through a Lease (default: on with --in-cluster and --interval)")
	f.StringVar(&o.leaderElectionID, "leader-election-id", "", "the Lease's name (default: truce-sync-NAME)")
	f.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "the Lease's namespace (default: --namespace)")
	f.StringVar(&o.healthAddr, "health-addr", ":8081", "address serving /healthz and /readyz; 0 to disable")
	f.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "address serving /metrics; 0 to disable")
	f.StringVarP(&o.output, "output", "o", "text", "output of --once: text or json")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound of one pass; 0 for none")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long the pass in progress may take to finish before it is cancelled")
	f.StringVar(&o.gitSecret, "git-secret", "", "a directory holding SOURCE's credentials as a mounted Flux Git secret: username and password, or bearerToken (https://); identity, known_hosts and password, the key's passphrase (SSH); read before every pass")
	f.BoolVar(&o.gitInsecureHTTP, "git-insecure-http", false, "send --git-secret's credentials to a plain http:// SOURCE, in clear text")
	return cmd
}

// syncSetup is everything a sync runs with.
type syncSetup struct {
	source     manifest.GitSource
	opts       reconcile.Options
	cluster    cluster.Cluster
	config     *rest.Config // nil for the in-process cluster
	store      reconcile.Store
	gitsync    *gitsync.Store // nil unless --status gitsync on a real cluster
	reconciler *reconcile.Reconciler
	logger     *slog.Logger
	metrics    *syncMetrics // the controller's
	controller bool
	close      []func()
}

func (s *syncSetup) Close() {
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
}

func runSync(ctx context.Context, cmd *cobra.Command, o *syncOptions, arg string) error {
	s, err := o.setup(ctx, cmd, arg)
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return err
	}
	if s.controller {
		return o.runController(ctx, s)
	}
	return o.runOnce(ctx, cmd, s)
}

// setup checks the flags, reads the ignore rules and admission files,
// opens the cluster and the store, and builds the reconciler.
func (o *syncOptions) setup(ctx context.Context, cmd *cobra.Command, arg string) (*syncSetup, error) {
	flags := cmd.Flags()
	switch o.output {
	case "text", "json":
	default:
		return nil, fmt.Errorf("unknown output format %q (want text or json)", o.output)
	}
	drift := reconcile.DriftMode(o.drift)
	if drift != reconcile.DriftServer && drift != reconcile.DriftOffline {
		return nil, fmt.Errorf("--drift %q: want server or offline", o.drift)
	}
	if o.status != statusGitSync && o.status != statusNone {
		return nil, fmt.Errorf("--status %q: want gitsync or none", o.status)
	}
	if o.once && flags.Changed("interval") {
		return nil, errors.New("--once runs one pass; --interval is for the controller: give one of them")
	}
	if !o.once && o.interval <= 0 {
		return nil, fmt.Errorf("--interval must be positive, got %s", o.interval)
	}
	if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
		return nil, fmt.Errorf("--name %q: %s", o.name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
		return nil, fmt.Errorf("--namespace %q: %s", o.namespace, strings.Join(errs, "; "))
	}
	if o.prune && o.status == statusNone {
		return nil, errors.New("--prune needs --status gitsync: with --status none nothing remembers what truce applied, so nothing could be pruned safely")
	}
	if len(o.admission) > 0 && drift != reconcile.DriftOffline {
		return nil, errors.New("--admission feeds the offline prediction: add --drift offline (with --drift server the API server's own admission predicts)")
	}
	onCluster := o.kubeconfig != "" || o.kubeContext != "" || o.inCluster
	switch {
	case o.memory && onCluster:
		return nil, errors.New("--memory rehearses against the in-process cluster; --kubeconfig, --context and --in-cluster name a real one: give one of them")
	case o.inCluster && (o.kubeconfig != "" || o.kubeContext != ""):
		return nil, errors.New("--in-cluster uses the pod's service account; --kubeconfig and --context name another cluster: give one of them")
	case onCluster && len(o.cluster) > 0:
		return nil, errors.New("-c describes the in-process cluster; --kubeconfig, --context and --in-cluster name a real one: give one of them")
	}
	leaderElect := o.leaderElect
	if !flags.Changed("leader-elect") {
		leaderElect = o.inCluster && !o.once
	}
	switch {
	case leaderElect && o.once:
		return nil, errors.New("--leader-elect is for the controller (--interval); --once runs one pass")
	case leaderElect && !onCluster:
		return nil, errors.New("--leader-elect needs a real cluster (--kubeconfig or --in-cluster) to hold the Lease")
	}
	o.leaderElect = leaderElect
	if o.leaderElectionID == "" {
		o.leaderElectionID = "truce-sync-" + o.name
	}
	if o.leaderElectionNamespace == "" {
		o.leaderElectionNamespace = o.namespace
	}

	src, err := parseSyncSource(arg, o.ref, o.path)
	if err != nil {
		return nil, err
	}
	gitAuth, err := o.gitCredentials(src)
	if err != nil {
		return nil, err
	}
	rules, err := loadIgnoreRules(ctx, o.ignoreFiles)
	if err != nil {
		return nil, err
	}
	opts := reconcile.DefaultOptions()
	opts.Name, opts.Namespace = o.name, o.namespace
	opts.Force, opts.Prune, opts.DryRun, opts.Drift = o.force, o.prune, o.dryRun, drift
	opts.Rules = rules
	opts.Loop = reconcile.LoopOptions{Threshold: o.loopThreshold, Window: o.loopWindow}
	opts.Backoff = reconcile.Backoff{Initial: o.backoffInitial, Factor: o.backoffFactor, Max: o.backoffMax}

	s := &syncSetup{source: src, opts: opts, controller: !o.once}
	if s.controller {
		s.logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	} else {
		s.logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	s.logger = s.logger.With("sync", o.namespace+"/"+o.name)

	var predictorFiles []*unstructured.Unstructured
	if len(o.admission) > 0 {
		objs, err := manifest.LoadPaths(ctx, o.admission, manifest.DefaultOptions())
		if err != nil {
			return nil, fmt.Errorf("--admission: %w", err)
		}
		for _, m := range objs {
			predictorFiles = append(predictorFiles, m.Object)
		}
		if len(predictorFiles) == 0 {
			return nil, fmt.Errorf("--admission %s: no objects found", strings.Join(o.admission, ", "))
		}
	}

	if onCluster {
		if s.config, err = o.restConfig(); err != nil {
			return s, err
		}
		c, err := live.New(s.config)
		if err != nil {
			return s, err
		}
		s.cluster = c
	} else if o.mem != nil {
		s.cluster = o.mem
	} else {
		state, aopts, clusterObjs, err := o.clusterFlags.load(ctx)
		if err != nil {
			return s, fmt.Errorf("-c: %w", err)
		}
		mem, err := memory.New(ctx, state, aopts)
		if err != nil {
			return s, admission.WithSource(err, clusterObjs)
		}
		s.cluster = mem
		s.close = append(s.close, mem.Close)
	}

	switch {
	case onCluster && o.status == statusGitSync:
		spec := gitsync.SpecFor(src, opts, o.specInterval(), o.admission)
		store, err := gitsync.NewStoreForConfig(s.config, o.namespace, o.name, spec)
		if err != nil {
			return s, err
		}
		if err := store.Check(ctx); err != nil {
			return s, err
		}
		s.store, s.gitsync = store, store
	default:
		// --status none, or the in-process cluster: the state lives as
		// long as the process.
		s.store = &reconcile.MemoryStore{}
	}

	view := reconcile.ClusterAdmission(s.cluster)
	s.close = append(s.close, view.Close)
	with := []reconcile.Option{reconcile.WithAdmission(view), reconcile.WithLogger(s.logger)}
	switch {
	case predictorFiles != nil:
		fixed := reconcile.FixedAdmission(predictorFiles)
		s.close = append(s.close, fixed.Close)
		with = append(with, reconcile.WithPredictor(fixed))
	case drift == reconcile.DriftOffline:
		with = append(with, reconcile.WithPredictor(view))
	}
	// A dry run writes nothing, events included; the events of a rehearsal
	// would go to a cluster that disappears with the process.
	if onCluster && !o.dryRun {
		logger := s.logger
		with = append(with, reconcile.WithRecorder(&reconcile.ClusterRecorder{
			Cluster: s.cluster, Namespace: o.namespace, Component: "truce-sync",
			OnError: func(err error) { logger.Warn("recording an event", "error", err.Error()) },
		}))
	}
	if s.controller {
		if err := o.addMetrics(s, &with); err != nil {
			return s, err
		}
	}
	git := &reconcile.GitSource{Git: src, Options: manifest.DefaultOptions(), Auth: gitAuth}
	if s.reconciler, err = reconcile.New(s.cluster, git, s.store, opts, with...); err != nil {
		return s, err
	}
	return s, nil
}

func (o *syncOptions) specInterval() time.Duration {
	if o.once {
		return 0
	}
	return o.interval
}

func (o *syncOptions) restConfig() (*rest.Config, error) {
	if o.inCluster {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--in-cluster: %w", err)
		}
		return cfg, nil
	}
	return live.Load(o.kubeconfig, o.kubeContext)
}

// syncMetrics is the registry /metrics serves, set up by addMetrics.
type syncMetrics struct {
	registry *prometheus.Registry
	loop     *controller.Metrics
}

func (o *syncOptions) addMetrics(s *syncSetup, with *[]reconcile.Option) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}
	passes, err := reconcile.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering the sync metrics: %w", err)
	}
	loop, err := controller.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering the sync metrics: %w", err)
	}
	*with = append(*with, reconcile.WithMetrics(passes))
	s.metrics = &syncMetrics{registry: reg, loop: loop}
	return nil
}

// gitCredentials checks --git-secret and --git-insecure-http and returns
// what reads the credentials before every pass (nil without --git-secret).
func (o *syncOptions) gitCredentials(src manifest.GitSource) (func() (transport.AuthMethod, error), error) {
	if o.gitSecret == "" {
		if o.gitInsecureHTTP {
			return nil, errors.New("--git-insecure-http lets the credentials of --git-secret go over plain http://: it needs --git-secret")
		}
		return nil, nil
	}
	dir, opts := o.gitSecret, manifest.GitAuthOptions{InsecureHTTP: o.gitInsecureHTTP}
	read := func() (transport.AuthMethod, error) {
		auth, err := manifest.GitAuthFromDir(dir, src.URL, opts)
		if err != nil {
			return nil, fmt.Errorf("--git-secret %s: %w", dir, err)
		}
		return auth, nil
	}
	// Read once now: a bad directory is bad input, found before anything
	// is read or written.
	if _, err := read(); err != nil {
		if errors.Is(err, manifest.ErrGitInsecure) && isPlainHTTP(src.URL) {
			err = fmt.Errorf("%w (--git-insecure-http allows it)", err)
		}
		return nil, err
	}
	return read, nil
}

func isPlainHTTP(u string) bool { return strings.HasPrefix(strings.ToLower(u), "http://") }

// parseSyncSource reads SOURCE and applies --ref and --path. A Git URL is
// parsed by manifest.ParseGitArg; a local repository may use the same
// //path and ?ref= suffixes.
func parseSyncSource(arg, ref, path string) (manifest.GitSource, error) {
	src, remote := manifest.ParseGitArg(arg)
	if !remote && isPlainHTTP(arg) {
		// ParseGitArg leaves plain http:// out (truce check never reads
		// it); a sync reads it as Flux does, spelled like https://.
		if s, ok := manifest.ParseGitArg("https://" + arg[len("http://"):]); ok {
			s.URL = "http://" + s.URL[len("https://"):]
			src, remote = s, true
		}
	}
	if remote {
		if u, err := url.Parse(src.URL); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				// Not quoted back: the message would print the password.
				return manifest.GitSource{}, errors.New("SOURCE has a password in its URL, which would show in logs, Events and the GitSync status: " +
					"put it in --git-secret DIR (files username and password) instead")
			}
		}
	} else {
		if strings.Contains(arg, "://") || strings.HasPrefix(arg, "git@") {
			return src, fmt.Errorf("SOURCE %q is not a Git URL truce can read: want URL[//path][?ref=REF] (https://, ssh://, git@host:path, file://, http://) or a local repository", arg)
		}
		var err error
		if src, err = parseLocalSource(arg); err != nil {
			return src, err
		}
	}
	if ref != "" {
		if src.Ref != "" && src.Ref != ref {
			return src, fmt.Errorf("SOURCE names ref %q and --ref %q: give one", src.Ref, ref)
		}
		src.Ref = ref
	}
	if path != "" {
		if src.Path != "" && src.Path != path {
			return src, fmt.Errorf("SOURCE names path %q and --path %q: give one", src.Path, path)
		}
		src.Path = path
	}
	return src, nil
}

// parseLocalSource reads a local repository argument,
// PATH[//sub/path][?ref=REF]; a path that exists only as written whole
// (a "?" in a directory name) is taken whole.
func parseLocalSource(arg string) (manifest.GitSource, error) {
	src, err := splitLocalSource(arg)
	if err != nil {
		if _, serr := os.Stat(arg); serr == nil {
			return manifest.GitSource{URL: arg}, nil
		}
	}
	return src, err
}

func splitLocalSource(arg string) (manifest.GitSource, error) {
	base, query, _ := strings.Cut(arg, "?")
	src := manifest.GitSource{URL: base}
	if i := strings.Index(base, "//"); i > 0 {
		src.URL = base[:i]
		if sub := pathpkg.Clean(base[i+2:]); sub != "." {
			src.Path = sub
		}
	}
	if query != "" {
		values, err := url.ParseQuery(query)
		if err != nil || len(values) != 1 || len(values["ref"]) != 1 {
			return src, fmt.Errorf("SOURCE %q: want PATH[//sub/path][?ref=REF]", arg)
		}
		src.Ref = values["ref"][0]
	}
	if _, err := os.Stat(src.URL); err != nil {
		return src, fmt.Errorf("SOURCE %s: %w", arg, err)
	}
	return src, nil
}

// loadIgnoreRules reads the ignore rules of Flux Kustomizations and Argo CD
// Applications (and argocd-cm) in files.
func loadIgnoreRules(ctx context.Context, files []string) ([]ignore.Rule, error) {
	var rules []ignore.Rule
	for _, file := range files {
		objs, err := manifest.LoadPaths(ctx, []string{file}, manifest.DefaultOptions())
		if err != nil {
			return nil, fmt.Errorf("--ignore %s: %w", file, err)
		}
		in := make([]gitops.Object, len(objs))
		for i, m := range objs {
			in[i] = gitops.Object{Source: m.Source.String(), Unstructured: m.Object}
		}
		settings, _, err := gitops.Discover(in)
		if err != nil {
			return nil, fmt.Errorf("--ignore %s: %w", file, err)
		}
		found := len(settings.Kustomizations) + len(settings.Applications)
		for _, k := range settings.Kustomizations {
			rules = append(rules, k.Rules()...)
		}
		for _, app := range settings.Applications {
			rules = append(rules, app.Rules()...)
		}
		if settings.ArgoConfig != nil && settings.ArgoConfig.Source != "" {
			found++
			for _, r := range settings.ArgoConfig.Rules() {
				if !r.Implied {
					rules = append(rules, r)
				}
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("--ignore %s: no Flux Kustomization, Argo CD Application or argocd-cm found to take ignore rules from", file)
		}
	}
	if _, err := ignore.Compile(rules, ignore.Options{}); err != nil {
		return nil, fmt.Errorf("--ignore: %w", err)
	}
	return rules, nil
}

// runOnce runs one pass and reports it.
func (o *syncOptions) runOnce(ctx context.Context, cmd *cobra.Command, s *syncSetup) error {
	pctx := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the pass took longer than --timeout %s", o.timeout))
		defer cancel()
	}
	res, err := s.reconciler.Reconcile(pctx)
	if err != nil {
		if cause := context.Cause(pctx); cause != nil && ctx.Err() == nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		if s.gitsync != nil && !o.dryRun {
			if rerr := s.gitsync.RecordFailure(ctx, err); rerr != nil {
				s.logger.Warn("recording the failed pass", "error", rerr.Error())
			}
		}
		if o.output == "json" {
			_ = writeSyncJSON(cmd.OutOrStdout(), syncReport{Source: s.source.String(), Error: err.Error()})
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
		return exitError{exitFailure}
	}
	rep := syncReport{Result: res, Source: s.source.String(), Synced: res.Synced(), Drifted: res.Drifted()}
	var werr error
	if o.output == "json" {
		werr = writeSyncJSON(cmd.OutOrStdout(), rep)
	} else {
		werr = writeSyncText(cmd.OutOrStdout(), rep, s.config == nil)
	}
	if werr != nil {
		return werr
	}
	switch {
	case len(res.Errors) > 0:
		return exitError{exitFailure}
	case len(res.Contested) > 0, o.dryRun && res.Drifted():
		return exitError{exitFound}
	}
	return nil
}

// runController runs passes until ctx ends.
func (o *syncOptions) runController(ctx context.Context, s *syncSetup) error {
	var failures controller.FailureRecorder
	if s.gitsync != nil && !o.dryRun {
		failures = s.gitsync
	}
	loop, err := controller.New(s.reconciler, controller.Options{
		Interval: o.interval, Backoff: s.opts.Backoff, Timeout: o.timeout, Grace: o.shutdownGrace,
		Failures: failures, Metrics: s.metrics.loop, Logger: s.logger,
	})
	if err != nil {
		return err
	}
	store := "memory"
	if s.gitsync != nil {
		store = s.gitsync.String()
	}
	s.logger.Info("syncing", "source", s.source.String(), "gitSecret", o.gitSecret, "interval", o.interval.String(), "prune", o.prune,
		"dryRun", o.dryRun, "drift", o.drift, "status", store, "inProcessCluster", s.config == nil)
	return controller.Run(ctx, loop, controller.RunOptions{
		Config:         s.config,
		LeaderElection: o.leaderElect, LeaderElectionID: o.leaderElectionID, LeaderElectionNamespace: o.leaderElectionNamespace,
		HealthAddr: o.healthAddr, MetricsAddr: o.metricsAddr, Gatherer: s.metrics.registry, Logger: s.logger,
		ShutdownTimeout: o.shutdownGrace + 10*time.Second,
	})
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
