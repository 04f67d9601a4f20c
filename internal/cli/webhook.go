package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/truce-dev/truce/webhook"
)

func newWebhookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve MutatingAdmissionPolicies and ValidatingAdmissionPolicies as admission webhooks",
		Long: `webhook serves policies to clusters that cannot (or should not) run them in-tree:
the same documents, the same engine and the same answers as truce admit.`,
	}
	cmd.AddCommand(newWebhookServeCommand(), newWebhookConfigCommand(), newWebhookCertsCommand())
	return cmd
}

type webhookServeOptions struct {
	policies, cluster   []string
	addr, probeAddr     string
	certFile, keyFile   string
	clientCA            string
	requestTimeout      time.Duration
	maxInFlight         int
	maxRequestBytes     int64
	reloadInterval      time.Duration
	shutdownGrace       time.Duration
	shutdownDelay       time.Duration
	logFormat, logLevel string
	watchNamespaces     bool
	kubeconfig          string
	kubeContext         string
}

func newWebhookServeCommand() *cobra.Command {
	o := &webhookServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve --policies DIR --tls-cert FILE --tls-key FILE",
		Short: "Serve AdmissionReview v1 at /mutate and /validate over HTTPS",
		Long: `serve answers AdmissionReview v1 requests at /mutate (MutatingAdmissionPolicies,
as a JSONPatch) and /validate (ValidatingAdmissionPolicies) with the upstream
policy plugins of kube-apiserver 1.37.2, matching as the in-tree plugins do
(matchConstraints, bindings, namespace and object selectors, matchConditions).
The namespaces and params the policies select come from --cluster.

At start the policies must compile and their mutations must be idempotent, or
serve exits with the reason. Afterwards the files are checked every
--reload-interval; a set that fails to load is logged, counted in /metrics and
shown by /readyz, and the previous set stays in force.

/healthz, /readyz and /metrics are served over plain HTTP on --probe-addr.
On SIGTERM /readyz fails at once, requests are still served for
--shutdown-delay (so endpoints drop the pod first), then the listener closes
and in-flight requests finish within --shutdown-grace.`,
		Example: `  truce webhook certs --out certs/
  truce webhook serve --policies examples/image-mirror/cluster \
    --tls-cert certs/tls.crt --tls-key certs/tls.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWebhookServe(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.policies, "policies", nil, "files or directories of policies, bindings and params to serve")
	f.StringSliceVarP(&o.cluster, "cluster", "c", nil, "files or directories describing the cluster: namespaces (with labels), CRDs, params")
	f.StringVar(&o.addr, "addr", ":8443", "address serving /mutate and /validate over TLS")
	f.StringVar(&o.probeAddr, "probe-addr", ":8081", "address serving /healthz, /readyz and /metrics over HTTP; empty to disable")
	f.StringVar(&o.certFile, "tls-cert", "", "serving certificate (PEM), reloaded when it changes")
	f.StringVar(&o.keyFile, "tls-key", "", "serving key (PEM), reloaded when it changes")
	f.StringVar(&o.clientCA, "client-ca", "", "require a client certificate signed by this CA (PEM) from the API server")
	f.DurationVar(&o.requestTimeout, "request-timeout", 1500*time.Millisecond, "answer a request that takes longer with HTTP 504 (keep it below the webhooks' timeoutSeconds)")
	f.IntVar(&o.maxInFlight, "max-in-flight", 64, "requests read and evaluated at once; more wait for a slot until their deadline, then get HTTP 429 (the API server applies the failurePolicy)")
	f.Int64Var(&o.maxRequestBytes, "max-request-bytes", 6<<20, "refuse request bodies larger than this with HTTP 413")
	f.DurationVar(&o.reloadInterval, "reload-interval", 5*time.Second, "how often to check the policy files for changes; 0 disables reloading")
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, keep serving this long with /readyz failing so endpoints drop the pod first")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 30*time.Second, "how long in-flight requests may take to finish on shutdown")
	f.StringVar(&o.logFormat, "log-format", "json", "log format: json or text")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug (every review), info, warn or error")
	f.BoolVar(&o.watchNamespaces, "watch-namespaces", false, "watch the cluster's namespaces (in-cluster, or --kubeconfig) so bindings' namespaceSelectors see their labels; needs get, list and watch on namespaces")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --watch-namespaces: the cluster to watch (default: in-cluster, then the usual kubeconfig)")
	f.StringVar(&o.kubeContext, "context", "", "with --watch-namespaces: the kubeconfig context")
	_ = cmd.MarkFlagRequired("policies")
	_ = cmd.MarkFlagRequired("tls-cert")
	_ = cmd.MarkFlagRequired("tls-key")
	return cmd
}

func runWebhookServe(ctx context.Context, cmd *cobra.Command, o *webhookServeOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var logger *slog.Logger
	switch o.logFormat {
	case "json":
		logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), hopts))
	case "text":
		logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), hopts))
	default:
		return fmt.Errorf("--log-format %q: want json or text", o.logFormat)
	}
	if o.maxInFlight < 1 {
		return fmt.Errorf("--max-in-flight %d: want at least 1", o.maxInFlight)
	}
	var namespaces webhook.Namespaces
	if o.watchNamespaces {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.kubeconfig
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}).ClientConfig()
		if err != nil {
			return fmt.Errorf("--watch-namespaces: %w", err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("--watch-namespaces: %w", err)
		}
		if namespaces, err = webhook.WatchNamespaces(ctx, client); err != nil {
			return fmt.Errorf("--watch-namespaces: %w", err)
		}
	} else if o.kubeconfig != "" || o.kubeContext != "" {
		return fmt.Errorf("--kubeconfig and --context only apply with --watch-namespaces")
	}
	h, err := webhook.NewHandler(ctx, webhook.Options{
		PolicyPaths: o.policies, ClusterPaths: o.cluster, Namespaces: namespaces,
		RequestTimeout: o.requestTimeout, MaxRequestBytes: o.maxRequestBytes, MaxInFlight: o.maxInFlight, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	return webhook.Serve(ctx, h, webhook.ServerOptions{
		Addr: o.addr, ProbeAddr: o.probeAddr, CertFile: o.certFile, KeyFile: o.keyFile, ClientCAFile: o.clientCA,
		ReloadInterval: o.reloadInterval, ShutdownDelay: o.shutdownDelay, ShutdownGrace: o.shutdownGrace, Logger: logger,
	})
}
