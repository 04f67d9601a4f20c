package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/internal/certs"
	"github.com/truce-dev/truce/lint"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/webhook/configuration"
)

// Defaults shared by `webhook config` and `webhook certs`: the names
// deploy/ uses.
const (
	defaultWebhookNamespace = "truce-system"
	defaultWebhookService   = "truce-webhook"
)

type webhookConfigOptions struct {
	policies       []string
	name           string
	namespace      string
	service        string
	port           int32
	url            string
	caBundle       string
	timeoutSeconds int32
	output         string
	limitFlags
}

func newWebhookConfigCommand() *cobra.Command {
	o := &webhookConfigOptions{}
	cmd := &cobra.Command{
		Use:   "config --policies PATH... --ca-bundle FILE",
		Short: "Generate the webhook configurations that register `truce webhook serve` with the API server",
		Long: `config prints a MutatingWebhookConfiguration (when --policies hold
MutatingAdmissionPolicies) and a ValidatingWebhookConfiguration (when they hold
ValidatingAdmissionPolicies) that send the writes the policies match to the
webhook's /mutate and /validate paths.

The rules are the union of the policies' matchConstraints.resourceRules; the
server still matches each policy exactly (names, exclusions, selectors,
bindings). The defaults are the safe ones: the mutating webhook fails open
(Ignore) and is reinvoked if needed, the validating webhook fails closed
(Fail), calls time out after 2 seconds, sideEffects None, matchPolicy
Equivalent, and kube-system and the webhook's own namespace are never
matched, so that both can restart while the webhook is down. Leases are
excluded by a matchCondition. See docs/webhook.md.

The policies are checked as the API server would check them when they are
created; an error names the file and line.`,
		Example: `  # Certificates, then the configurations for the Service in deploy/
  truce webhook certs --out deploy/certs
  truce webhook config --policies deploy/policies --ca-bundle deploy/certs/ca.crt | kubectl apply -f -

  # A webhook reached by URL instead of a Service
  truce webhook config --policies policies/ --url https://truce.example.com:8443 --ca-bundle ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWebhookConfig(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	o.limitFlags.register(f)
	f.StringSliceVar(&o.policies, "policies", nil, "files or directories (recursive) holding the MutatingAdmissionPolicies and ValidatingAdmissionPolicies the webhook serves (repeatable)")
	f.StringVar(&o.name, "name", configuration.DefaultName, "name of the two configurations")
	f.StringVar(&o.namespace, "namespace", defaultWebhookNamespace, "namespace of the webhook's Service and pods; never matched by the webhook")
	f.StringVar(&o.service, "service", defaultWebhookService, "name of the webhook's Service")
	f.Int32Var(&o.port, "port", configuration.DefaultPort, "port of the webhook's Service")
	f.StringVar(&o.url, "url", "", "https base URL of the webhook, instead of --service (/mutate and /validate are appended)")
	f.StringVar(&o.caBundle, "ca-bundle", "", "PEM file of the CA that signed the webhook's serving certificate (ca.crt of `truce webhook certs`)")
	f.Int32Var(&o.timeoutSeconds, "timeout-seconds", configuration.DefaultTimeoutSeconds, "how long the API server waits for the webhook (1 to 30)")
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml or json (a v1 List)")
	_ = cmd.MarkFlagRequired("policies")
	_ = cmd.MarkFlagRequired("ca-bundle")
	return cmd
}

func runWebhookConfig(ctx context.Context, cmd *cobra.Command, o *webhookConfigOptions) error {
	if o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("unknown output format %q (want yaml or json)", o.output)
	}
	opts := configuration.Options{Name: o.name, Namespace: o.namespace, TimeoutSeconds: o.timeoutSeconds}
	if o.url != "" && !cmd.Flags().Changed("namespace") {
		// A webhook outside the cluster has no namespace of its own to
		// exclude unless one is named.
		opts.Namespace = ""
	}
	if o.url != "" {
		if cmd.Flags().Changed("service") || cmd.Flags().Changed("port") {
			return errors.New("--url and --service/--port both say where the webhook is: give one or the other")
		}
		opts.URL = o.url
	} else {
		opts.Service = &configuration.Service{Namespace: o.namespace, Name: o.service, Port: o.port}
	}
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return fmt.Errorf("--ca-bundle: %w", err)
	}
	if err := configuration.CheckCABundle(ca); err != nil {
		return fmt.Errorf("--ca-bundle %s: %w", o.caBundle, err)
	}
	opts.CABundle = ca

	lopts, err := o.limitFlags.options()
	if err != nil {
		return err
	}
	lopts.Stdin = cmd.InOrStdin()
	objs, err := manifest.LoadPaths(ctx, o.policies, lopts)
	if err != nil {
		return err
	}
	policies := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		policies[i] = obj.Object
	}
	configs, err := configuration.Generate(policies, opts)
	if err != nil {
		var perr *configuration.PolicyError
		if errors.As(err, &perr) {
			return fmt.Errorf("%s: %w", objs[perr.Index].Source, err)
		}
		if errors.Is(err, configuration.ErrNoPolicies) {
			return fmt.Errorf("%w in %s", err, strings.Join(o.policies, ", "))
		}
		return err
	}
	if err := checkPolicies(ctx, objs, policies); err != nil {
		return err
	}
	for _, w := range configs.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	out, err := configs.Objects()
	if err != nil {
		return err
	}
	if err := lintConfigurations(ctx, cmd.ErrOrStderr(), out); err != nil {
		return err
	}
	return printConfigurations(cmd.OutOrStdout(), o.output, out)
}

// lintConfigurations runs truce lint's rules on what is about to be
// printed: the generated defaults are meant to be clean, so a finding
// (from unusual flags, e.g. --timeout-seconds 30) is shown, and an error
// keeps the configuration from being printed.
func lintConfigurations(ctx context.Context, stderr io.Writer, objs []*unstructured.Unstructured) error {
	in := &lint.Input{}
	for _, o := range objs {
		in.Objects = append(in.Objects, manifest.Object{Source: manifest.Source{File: "generated"}, Object: o})
	}
	findings, err := lint.Run(ctx, in, lint.Options{})
	if err != nil {
		return fmt.Errorf("linting the generated configurations: %w", err)
	}
	if len(findings) == 0 {
		return nil
	}
	if err := lint.WriteText(stderr, findings); err != nil {
		return err
	}
	for _, f := range findings {
		if f.Severity == lint.SeverityError {
			return fmt.Errorf("the generated configurations have lint errors (above)")
		}
	}
	return nil
}

// checkPolicies runs the objects through the checks the API server makes
// when they are created (schema, CEL compilation, bindings naming their
// policy), as the server will when it loads them: an error names the file
// and line now rather than at deployment.
func checkPolicies(ctx context.Context, objs []manifest.Object, policies []*unstructured.Unstructured) error {
	state, err := admission.NewState(policies...)
	if err != nil {
		return err
	}
	chain, err := admission.NewChain(ctx, state, admission.Options{})
	if err != nil {
		return admission.WithSource(err, objs)
	}
	chain.Close()
	return nil
}

func printConfigurations(w io.Writer, format string, objs []*unstructured.Unstructured) error {
	if format == "json" {
		items := make([]any, len(objs))
		for i, o := range objs {
			items[i] = o.Object
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	fmt.Fprintln(w, "# Generated by `truce webhook config`; regenerate it when the policies' matchConstraints change.")
	for i, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", o.GetKind(), err)
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

type webhookCertsOptions struct {
	service   string
	namespace string
	dnsNames  []string
	out       string
	validity  time.Duration
	force     bool
}

// The files `webhook certs` writes, as deploy/ and the server expect them.
const (
	caCertFile  = "ca.crt"
	tlsCertFile = "tls.crt"
	tlsKeyFile  = "tls.key"
)

func newWebhookCertsCommand() *cobra.Command {
	o := &webhookCertsOptions{}
	cmd := &cobra.Command{
		Use:   "certs --out DIR",
		Short: "Generate a CA and the webhook's serving certificate",
		Long: `certs writes a new CA certificate (ca.crt) and a serving certificate and key it
signed (tls.crt, tls.key) for the webhook's Service names:
SERVICE, SERVICE.NAMESPACE, SERVICE.NAMESPACE.svc and
SERVICE.NAMESPACE.svc.cluster.local (the API server verifies
SERVICE.NAMESPACE.svc). ca.crt is the --ca-bundle of ` + "`truce webhook config`" + `;
tls.crt and tls.key go into the webhook's TLS Secret (deploy/ reads them
from deploy/certs).

The CA's key is not kept: to renew, generate everything again and apply the
configurations with the new ca.crt. Existing files are not overwritten unless
--force is given.`,
		Example: `  truce webhook certs --out deploy/certs
  truce webhook certs --service policy --namespace platform --out certs/ --validity 2160h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWebhookCerts(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.service, "service", defaultWebhookService, "name of the webhook's Service")
	f.StringVar(&o.namespace, "namespace", defaultWebhookNamespace, "namespace of the webhook's Service")
	f.StringSliceVar(&o.dnsNames, "dns-name", nil, "further DNS names of the serving certificate, e.g. the host of a --url webhook (repeatable)")
	f.StringVar(&o.out, "out", "", "directory to write ca.crt, tls.crt and tls.key to (created if missing)")
	f.DurationVar(&o.validity, "validity", 365*24*time.Hour, "how long the CA and the serving certificate are valid")
	f.BoolVar(&o.force, "force", false, "overwrite existing files")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func runWebhookCerts(cmd *cobra.Command, o *webhookCertsOptions) error {
	if o.validity <= 0 {
		return fmt.Errorf("--validity %s: must be positive", o.validity)
	}
	if o.service == "" || o.namespace == "" {
		return errors.New("--service and --namespace must not be empty")
	}
	paths := map[string]string{}
	for _, name := range []string{caCertFile, tlsCertFile, tlsKeyFile} {
		paths[name] = filepath.Join(o.out, name)
		if o.force {
			continue
		}
		if _, err := os.Lstat(paths[name]); err == nil {
			return fmt.Errorf("%s exists; pass --force to replace it (and re-apply the webhook configurations with the new ca.crt)", paths[name])
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}

	host := o.service + "." + o.namespace + ".svc"
	dnsNames := append([]string{o.service, o.service + "." + o.namespace, host, host + ".cluster.local"}, o.dnsNames...)
	ca, err := certs.NewCA("truce webhook CA for "+host, o.validity)
	if err != nil {
		return err
	}
	pair, err := ca.Serving(host, dnsNames, nil, o.validity)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	// The key first: a failure after it leaves no certificate without its key.
	for _, f := range []struct {
		name string
		data []byte
		mode fs.FileMode
	}{
		{tlsKeyFile, pair.KeyPEM, 0o600},
		{tlsCertFile, pair.CertPEM, 0o644},
		{caCertFile, ca.PEM, 0o644},
	} {
		if err := yamledit.WriteFileAtomicMode(paths[f.name], f.data, f.mode); err != nil {
			return fmt.Errorf("writing %s: %w", paths[f.name], err)
		}
	}
	notAfter := "?"
	if block, _ := pem.Decode(pair.CertPEM); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			notAfter = cert.NotAfter.UTC().Format(time.RFC3339)
		}
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "wrote %s, %s and %s: a serving certificate for %s, valid until %s\n",
		paths[caCertFile], paths[tlsCertFile], paths[tlsKeyFile], strings.Join(dnsNames, ", "), notAfter)
	fmt.Fprintf(w, "next: truce webhook config --policies DIR --namespace %s --service %s --ca-bundle %s | kubectl apply -f -\n",
		o.namespace, o.service, paths[caCertFile])
	return nil
}
