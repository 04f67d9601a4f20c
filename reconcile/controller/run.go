package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// RunOptions configure Run.
type RunOptions struct {
	// Config reaches the cluster for leader election. Nil runs the loop
	// without a manager (a rehearsal against the in-process cluster): the
	// probes and /metrics are still served, leader election is refused.
	Config *rest.Config
	// LeaderElection makes replicas take turns through a Lease named
	// LeaderElectionID in LeaderElectionNamespace.
	LeaderElection                            bool
	LeaderElectionID, LeaderElectionNamespace string
	// HealthAddr serves /healthz and /readyz, MetricsAddr /metrics; empty
	// or "0" serves nothing.
	HealthAddr, MetricsAddr string
	// Gatherer is what /metrics serves: a registry of truce's own, not
	// controller-runtime's global one.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// ShutdownTimeout bounds the whole shutdown; it must exceed the loop's
	// grace period. Zero means the grace period plus 5 seconds.
	ShutdownTimeout time.Duration
}

func serves(addr string) bool { return addr != "" && addr != "0" }

// Run runs loop until ctx ends (SIGTERM): under a controller-runtime
// manager when a Config is given (leader election, probes), standalone
// otherwise. On shutdown /readyz fails at once, the pass in progress gets
// the loop's grace period, the lease is released, then the servers stop.
func Run(ctx context.Context, loop *Loop, o RunOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = loop.opts.Grace + 5*time.Second
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.NewRegistry()
	}
	loop.standby.Store(o.LeaderElection)
	stop := context.AfterFunc(ctx, func() { loop.stopping.Store(true) })
	defer stop()
	if o.Config == nil {
		if o.LeaderElection {
			return errors.New("leader election needs a cluster (--kubeconfig or --in-cluster)")
		}
		return runStandalone(ctx, loop, o)
	}
	if o.LeaderElection && (o.LeaderElectionID == "" || o.LeaderElectionNamespace == "") {
		return errors.New("leader election needs a lease name and namespace")
	}
	logger := logr.FromSlogHandler(o.Logger.Handler())
	health := o.HealthAddr
	if !serves(health) {
		health = "0"
	}
	mgr, err := manager.New(o.Config, manager.Options{
		// Nothing is decoded through the manager's client: an empty scheme
		// keeps client-go's global one out of it.
		Scheme:                        runtime.NewScheme(),
		Logger:                        logger,
		BaseContext:                   func() context.Context { return logr.NewContext(context.Background(), logger) },
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionResourceLock:    "leases",
		LeaderElectionReleaseOnCancel: true,
		// controller-runtime's metrics server serves its global registry;
		// /metrics is served below from o.Gatherer instead.
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  health,
		ReadinessEndpointName:   "/readyz",
		LivenessEndpointName:    "/healthz",
		GracefulShutdownTimeout: &o.ShutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding /healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("sync", loop.Ready); err != nil {
		return fmt.Errorf("adding /readyz: %w", err)
	}
	if err := mgr.Add(loop); err != nil {
		return fmt.Errorf("adding the sync loop: %w", err)
	}
	if serves(o.MetricsAddr) {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listening on %s for /metrics: %w", o.MetricsAddr, err)
		}
		timeout := 5 * time.Second
		// A manager.Server stops last, after the loop.
		if err := mgr.Add(&manager.Server{Name: "metrics", Server: metricsServer(o.Gatherer), Listener: ln, ShutdownTimeout: &timeout}); err != nil {
			ln.Close()
			return fmt.Errorf("adding /metrics: %w", err)
		}
	}
	o.Logger.Info("starting", "leaderElection", o.LeaderElection, "lease", o.LeaderElectionNamespace+"/"+o.LeaderElectionID,
		"healthAddr", o.HealthAddr, "metricsAddr", o.MetricsAddr)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the sync: %w", err)
	}
	return nil
}

func metricsServer(g prometheus.Gatherer) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

// ProbeHandler serves /healthz and /readyz for loop, as the manager does.
func ProbeHandler(loop *Loop) http.Handler {
	mux := http.NewServeMux()
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	ready := &healthz.Handler{Checks: map[string]healthz.Checker{"sync": loop.Ready}}
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	mux.Handle("/readyz", http.StripPrefix("/readyz", ready))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", ready))
	return mux
}

// runStandalone runs the loop and the servers without a manager; the
// servers stop after the loop.
func runStandalone(ctx context.Context, loop *Loop, o RunOptions) error {
	var servers []*http.Server
	var listeners []net.Listener
	listen := func(addr string, srv *http.Server, what string) error {
		if !serves(addr) {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listening on %s for %s: %w", addr, what, err)
		}
		servers, listeners = append(servers, srv), append(listeners, ln)
		return nil
	}
	err := errors.Join(
		listen(o.HealthAddr, &http.Server{Handler: ProbeHandler(loop), ReadHeaderTimeout: 10 * time.Second}, "/healthz and /readyz"),
		listen(o.MetricsAddr, metricsServer(o.Gatherer), "/metrics"))
	if err != nil {
		for _, ln := range listeners {
			ln.Close()
		}
		return err
	}
	g := &errgroup.Group{}
	for i := range servers {
		g.Go(func() error {
			if err := servers[i].Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving on %s: %w", listeners[i].Addr(), err)
			}
			return nil
		})
	}
	loopErr := loop.Start(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(sctx)
	}
	return errors.Join(loopErr, g.Wait())
}
