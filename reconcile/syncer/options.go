// Package syncer is `truce sync` without its flag parsing and printing:
// the options of one sync, completed and validated as kubectl's commands
// do (Complete, Validate), opened into a cluster, a store and a
// reconcile.Reconciler (Open), and run as one pass (Sync.Once) or as the
// controller (Sync.Serve). Its errors name the flags of truce sync, the
// vocabulary users give these options in.
package syncer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
)

// Where the state and the status of a sync are kept (--status).
const (
	// StatusGitSync keeps them in the GitSync object (needs its CRD).
	StatusGitSync = "gitsync"
	// StatusNone keeps them in memory, for the life of the process.
	StatusNone = "none"
)

// DefaultInterval is the time between passes of the controller.
const DefaultInterval = time.Minute

// Options are what a sync runs with, as truce sync's flags give them.
type Options struct {
	// Source is SOURCE: a Git URL or a local repository, with an optional
	// //sub/path and ?ref=; Ref and Path (--ref, --path) may give those
	// instead.
	Source, Ref, Path string
	// Once runs one pass; otherwise passes run every Interval.
	Once bool
	// Interval is --interval when given; Complete sets DefaultInterval
	// for the controller otherwise.
	Interval *time.Duration
	// DryRun, Prune and Force are reconcile.Options'.
	DryRun, Prune, Force bool
	// Drift is reconcile.DriftServer or reconcile.DriftOffline.
	Drift string
	// Admission are the files of admission configuration the offline
	// prediction uses instead of the cluster's.
	Admission []string
	// Manifest bounds what is read of the repository and of Admission
	// (the --max-* flags); zero limits are manifest's defaults.
	Manifest manifest.Options
	// Rules reads the ignore rules when the sync opens (nil: none).
	Rules func(ctx context.Context) ([]ignore.Rule, error)
	Loop  reconcile.LoopOptions
	// Backoff is the self-heal schedule of the controller.
	Backoff reconcile.Backoff
	// Name and Namespace name the sync: its GitSync, tracking ids and
	// Lease.
	Name, Namespace string
	// Status is StatusGitSync or StatusNone.
	Status string

	// Memory, InCluster, Kubeconfig and Context choose the cluster: the
	// in-process one (the default without the others) or a real one.
	Memory, InCluster   bool
	Kubeconfig, Context string
	// InProcess opens the in-process cluster a rehearsal runs against,
	// and returns what closes it.
	InProcess func(ctx context.Context) (cluster.Cluster, func(), error)
	// InProcessObjects tells that objects were given for the in-process
	// cluster (-c), which contradicts a real one.
	InProcessObjects bool

	// LeaderElect is --leader-elect when given; Complete defaults it to
	// on for the controller in a pod (InCluster).
	LeaderElect                               *bool
	LeaderElectionID, LeaderElectionNamespace string
	// HealthAddr and MetricsAddr serve the probes and /metrics ("" or
	// "0": not served).
	HealthAddr, MetricsAddr string
	// Timeout bounds one pass (0: unbounded); ShutdownGrace is how long the
	// pass in progress may take to finish after SIGTERM.
	Timeout, ShutdownGrace time.Duration

	// GitSecret is a directory holding SOURCE's credentials as a mounted
	// Flux Git secret; GitInsecureHTTP lets them go over plain http://.
	GitSecret       string
	GitInsecureHTTP bool

	// Render says how a Helm chart or a Jsonnet directory is rendered.
	Render RenderOptions

	// Log receives the logs (stderr): JSON for the controller, warnings
	// as text for one pass. nil discards them.
	Log io.Writer

	leaderElect bool
}

// DefaultOptions are truce sync's defaults.
func DefaultOptions() Options {
	def := reconcile.DefaultOptions()
	return Options{
		Force: def.Force, Drift: string(def.Drift), Loop: def.Loop, Backoff: def.Backoff,
		Name: def.Name, Namespace: def.Namespace, Status: StatusGitSync,
		HealthAddr: ":8081", MetricsAddr: ":8080",
		Timeout: 10 * time.Minute, ShutdownGrace: 30 * time.Second,
	}
}

// Complete fills in what follows from the other options: the interval of
// the controller, leader election (on for the controller in a pod unless
// given) and the Lease's name and namespace.
func (o *Options) Complete() {
	if o.Interval == nil && !o.Once {
		d := DefaultInterval
		o.Interval = &d
	}
	if o.LeaderElect != nil {
		o.leaderElect = *o.LeaderElect
	} else {
		o.leaderElect = o.InCluster && !o.Once
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "truce-sync-" + o.Name
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.Namespace
	}
}

// Validate checks the options against each other, before anything is
// read: SOURCE, the credentials and the files are read by Open.
func (o *Options) Validate() error {
	drift := reconcile.DriftMode(o.Drift)
	if drift != reconcile.DriftServer && drift != reconcile.DriftOffline {
		return fmt.Errorf("--drift %q: want server or offline", o.Drift)
	}
	if o.Status != StatusGitSync && o.Status != StatusNone {
		return fmt.Errorf("--status %q: want gitsync or none", o.Status)
	}
	if o.Once && o.Interval != nil {
		return errors.New("--once runs one pass; --interval is for the controller: give one of them")
	}
	if !o.Once && (o.Interval == nil || *o.Interval <= 0) {
		return fmt.Errorf("--interval must be positive, got %s", o.interval())
	}
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return fmt.Errorf("--name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if _, err := o.Render.render(o.Name, o.Namespace); err != nil {
		return err
	}
	if o.Prune && o.Status == StatusNone {
		return errors.New("--prune needs --status gitsync: with --status none nothing remembers what truce applied, so nothing could be pruned safely")
	}
	if len(o.Admission) > 0 && drift != reconcile.DriftOffline {
		return errors.New("--admission feeds the offline prediction: add --drift offline (with --drift server the API server's own admission predicts)")
	}
	onCluster := o.onCluster()
	switch {
	case o.Memory && onCluster:
		return errors.New("--memory rehearses against the in-process cluster; --kubeconfig, --context and --in-cluster name a real one: give one of them")
	case o.InCluster && (o.Kubeconfig != "" || o.Context != ""):
		return errors.New("--in-cluster uses the pod's service account; --kubeconfig and --context name another cluster: give one of them")
	case onCluster && o.InProcessObjects:
		return errors.New("-c describes the in-process cluster; --kubeconfig, --context and --in-cluster name a real one: give one of them")
	}
	switch {
	case o.leaderElect && o.Once:
		return errors.New("--leader-elect is for the controller (--interval); --once runs one pass")
	case o.leaderElect && !onCluster:
		return errors.New("--leader-elect needs a real cluster (--kubeconfig or --in-cluster) to hold the Lease")
	}
	return nil
}

// onCluster reports whether the sync runs against a real cluster.
func (o *Options) onCluster() bool { return o.Kubeconfig != "" || o.Context != "" || o.InCluster }

// interval is the time between passes; 0 for one pass.
func (o *Options) interval() time.Duration {
	if o.Once || o.Interval == nil {
		return 0
	}
	return *o.Interval
}
