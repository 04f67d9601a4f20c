package syncer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/controller"
	"github.com/truce-dev/truce/reconcile/gitsync"
)

// Sync is an opened sync: its source, cluster, store and Reconciler. Close
// it when done.
type Sync struct {
	opts       Options
	source     manifest.GitSource
	reconcile  reconcile.Options
	config     *rest.Config // nil for the in-process cluster
	gitsync    *gitsync.Store
	reconciler *reconcile.Reconciler
	logger     *slog.Logger
	metrics    *metrics // the controller's
	close      []func()
}

// Open reads SOURCE, its credentials, the ignore rules and the admission
// files, opens the cluster and the store, and builds the reconciler. o
// must be completed and valid. On error, what was opened is closed.
func (o Options) Open(ctx context.Context) (*Sync, error) {
	s, err := o.open(ctx)
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (o Options) open(ctx context.Context) (*Sync, error) {
	s := &Sync{opts: o}
	src, err := parseSource(o.Source, o.Ref, o.Path)
	if err != nil {
		return s, err
	}
	s.source = src
	gitAuth, err := credentials(src, o.GitSecret, o.GitInsecureHTTP)
	if err != nil {
		return s, err
	}
	var rules []ignore.Rule
	if o.Rules != nil {
		if rules, err = o.Rules(ctx); err != nil {
			return s, err
		}
	}
	drift := reconcile.DriftMode(o.Drift)
	opts := reconcile.DefaultOptions()
	opts.Name, opts.Namespace = o.Name, o.Namespace
	opts.Force, opts.Prune, opts.DryRun, opts.Drift = o.Force, o.Prune, o.DryRun, drift
	opts.Rules = rules
	opts.Loop = o.Loop
	opts.Backoff = o.Backoff
	s.reconcile = opts

	logs := o.Log
	if logs == nil {
		logs = io.Discard
	}
	if o.Once {
		s.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	} else {
		s.logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s.logger = s.logger.With("sync", o.Namespace+"/"+o.Name)

	var predictorFiles []*unstructured.Unstructured
	if len(o.Admission) > 0 {
		objs, err := manifest.LoadPaths(ctx, o.Admission, o.Manifest)
		if err != nil {
			return s, fmt.Errorf("--admission: %w", err)
		}
		for _, m := range objs {
			predictorFiles = append(predictorFiles, m.Object)
		}
		if len(predictorFiles) == 0 {
			return s, fmt.Errorf("--admission %s: no objects found", strings.Join(o.Admission, ", "))
		}
	}

	var c cluster.Cluster
	if o.onCluster() {
		if s.config, err = o.restConfig(); err != nil {
			return s, err
		}
		if c, err = live.New(s.config); err != nil {
			return s, err
		}
	} else {
		if o.InProcess == nil {
			return s, errors.New("no in-process cluster to rehearse against")
		}
		var closeFn func()
		if c, closeFn, err = o.InProcess(ctx); err != nil {
			return s, err
		}
		if closeFn != nil {
			s.close = append(s.close, closeFn)
		}
	}

	var store reconcile.Store
	switch {
	case o.onCluster() && o.Status == StatusGitSync:
		spec := gitsync.SpecFor(src, opts, o.interval(), o.Admission)
		gs, err := gitsync.NewStoreForConfig(s.config, o.Namespace, o.Name, spec)
		if err != nil {
			return s, err
		}
		if err := gs.Check(ctx); err != nil {
			return s, err
		}
		store, s.gitsync = gs, gs
	default:
		// --status none, or the in-process cluster: the state lives as
		// long as the process.
		store = &reconcile.MemoryStore{}
	}

	view := reconcile.ClusterAdmission(c)
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
	if o.onCluster() && !o.DryRun {
		logger := s.logger
		with = append(with, reconcile.WithRecorder(&reconcile.ClusterRecorder{
			Cluster: c, Namespace: o.Namespace, Component: "truce-sync",
			OnError: func(err error) { logger.Warn("recording an event", "error", err.Error()) },
		}))
	}
	if !o.Once {
		m, err := newMetrics()
		if err != nil {
			return s, err
		}
		s.metrics = m
		with = append(with, reconcile.WithMetrics(m.passes))
	}
	rnd, err := o.Render.render(o.Name, o.Namespace)
	if err != nil {
		return s, err
	}
	git := &reconcile.GitSource{Git: src, Options: o.Manifest, Auth: gitAuth, Render: rnd}
	if s.reconciler, err = reconcile.New(c, git, store, opts, with...); err != nil {
		return s, err
	}
	return s, nil
}

func (o Options) restConfig() (*rest.Config, error) {
	if o.InCluster {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--in-cluster: %w", err)
		}
		return cfg, nil
	}
	return live.Load(o.Kubeconfig, o.Context)
}

// Close releases what Open opened, in reverse order.
func (s *Sync) Close() {
	if s == nil {
		return
	}
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
	s.close = nil
}

// Source is SOURCE as read, with its ref and sub-path.
func (s *Sync) Source() string { return s.source.String() }

// InProcess reports whether the sync runs against the in-process cluster
// (a rehearsal).
func (s *Sync) InProcess() bool { return s.config == nil }

// Once runs one pass, bounded by Options.Timeout. A pass that could not
// run is recorded in the GitSync (unless a dry run) and returned as the
// error, with the timeout named when it was the cause.
func (s *Sync) Once(ctx context.Context) (*reconcile.Result, error) {
	pctx := ctx
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeoutCause(ctx, s.opts.Timeout, fmt.Errorf("the pass took longer than --timeout %s", s.opts.Timeout))
		defer cancel()
	}
	res, err := s.reconciler.Reconcile(pctx)
	if err == nil {
		return res, nil
	}
	if cause := context.Cause(pctx); cause != nil && ctx.Err() == nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	if s.gitsync != nil && !s.opts.DryRun {
		if rerr := s.gitsync.RecordFailure(ctx, err); rerr != nil {
			s.logger.Warn("recording the failed pass", "error", rerr.Error())
		}
	}
	return nil, err
}

// Serve runs passes until ctx ends: the controller, with its schedule,
// leader election, probes and metrics.
func (s *Sync) Serve(ctx context.Context) error {
	if s.metrics == nil {
		return errors.New("the sync was opened for one pass (--once)")
	}
	o := s.opts
	var failures controller.FailureRecorder
	if s.gitsync != nil && !o.DryRun {
		failures = s.gitsync
	}
	loop, err := controller.New(s.reconciler, controller.Options{
		Interval: o.interval(), Backoff: s.reconcile.Backoff, Timeout: o.Timeout, Grace: o.ShutdownGrace,
		Failures: failures, Metrics: s.metrics.loop, Logger: s.logger,
	})
	if err != nil {
		return err
	}
	store := "memory"
	if s.gitsync != nil {
		store = s.gitsync.String()
	}
	s.logger.Info("syncing", "source", s.source.String(), "gitSecret", o.GitSecret, "interval", o.interval().String(), "prune", o.Prune,
		"dryRun", o.DryRun, "drift", o.Drift, "status", store, "inProcessCluster", s.config == nil)
	return controller.Run(ctx, loop, controller.RunOptions{
		Config:         s.config,
		LeaderElection: o.leaderElect, LeaderElectionID: o.LeaderElectionID, LeaderElectionNamespace: o.LeaderElectionNamespace,
		HealthAddr: o.HealthAddr, MetricsAddr: o.MetricsAddr, Gatherer: s.metrics.registry, Logger: s.logger,
		ShutdownTimeout: o.ShutdownGrace + 10*time.Second,
	})
}

// metrics is the registry /metrics serves: the Go runtime, the process,
// the passes and the schedule.
type metrics struct {
	registry *prometheus.Registry
	passes   *reconcile.PrometheusMetrics
	loop     *controller.Metrics
}

func newMetrics() (*metrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	passes, err := reconcile.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the sync metrics: %w", err)
	}
	loop, err := controller.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the sync metrics: %w", err)
	}
	return &metrics{registry: reg, passes: passes, loop: loop}, nil
}
