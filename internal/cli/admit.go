package cli

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

type admitOptions struct {
	clusterFlags
	limitFlags
	files           []string
	output          string
	user            string
	groups          []string
	fieldValidation string
	kubeconfig      string
	kubeContext     string
	dryRun          string
	// fieldManager names the writer in managedFields; empty is kubectl's
	// default for the command that sends the write.
	fieldManager      string
	showManagedFields bool
}

// fieldManagerFor is the field manager of a write of op: --field-manager,
// or what kubectl create (a CREATE) or kubectl replace (an UPDATE) sends.
func (o *admitOptions) fieldManagerFor(op admission.Operation) string {
	if o.fieldManager != "" {
		return o.fieldManager
	}
	return admission.KubectlFieldManager(op)
}

func newAdmitCommand() *cobra.Command {
	o := &admitOptions{}
	cmd := &cobra.Command{
		Use:   "admit -f PATH... [-c PATH...]",
		Short: "Run writes through kube-apiserver's admission chain offline and show what would be stored",
		Long: `admit runs each object of -f as one write (in input order) through the admission
chain of kube-apiserver 1.37.2 against the cluster described by -c: API defaulting,
authorization, built-in mutating plugins, MutatingAdmissionPolicies, mutating
webhooks (with reinvocation), the resource's validation, Pod Security,
ValidatingAdmissionPolicies and validating webhooks. A write whose object exists
in the cluster state is an UPDATE, otherwise a CREATE; admitted writes are added
to the state, so later writes see them. Every write is a dry run: webhooks are
told dryRun: true.

managedFields are recorded for every write as the server records them: the
stored entries updated for the writer (--field-manager; by default what kubectl
sends: kubectl-create for a CREATE, kubectl-replace for an UPDATE). An object of
-c without managedFields is taken to have been created with kubectl create;
give its real entries (kubectl get -o yaml --show-managed-fields) to use them.
-o yaml and -o json leave managedFields out unless --show-managed-fields.

Exit status: 0 when every write is admitted, 1 when any is denied, 2 on error.`,
		Example: `  # What does the API server store for this Deployment, given these policies?
  truce admit -f examples/image-mirror/app -f examples/image-mirror/batch -c examples/image-mirror/cluster

  # The same, as JSON for CI
  truce admit -f app/ -c cluster/ -o json

  # Compare with a real cluster (server-side dry run)
  truce admit -f app/ --kubeconfig ~/.kube/config --dry-run=server`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdmit(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.files, "filename", "f", nil, "files or directories (recursive) of manifests to write; - for stdin")
	o.clusterFlags.register(f)
	o.limitFlags.register(f)
	o.clusterFlags.limits = &o.limitFlags
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, yaml or json")
	f.StringVar(&o.user, "user", "", "the user making the writes (default: a cluster admin in system:masters)")
	f.StringSliceVar(&o.groups, "group", nil, "a group of --user (repeatable)")
	f.StringVar(&o.fieldValidation, "field-validation", metav1.FieldValidationStrict, "unknown and duplicate fields: Strict (kubectl's default), Warn or Ignore")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --dry-run=server: the cluster to ask")
	f.StringVar(&o.kubeContext, "context", "", "with --dry-run=server: the kubeconfig context")
	f.StringVar(&o.dryRun, "dry-run", "", "server: send the writes to the cluster of --kubeconfig as server-side dry runs instead of admitting them offline")
	f.StringVar(&o.fieldManager, "field-manager", "", "the writer's name in managedFields (default: kubectl-create for a CREATE, kubectl-replace for an UPDATE, as kubectl create and kubectl replace send)")
	f.BoolVar(&o.showManagedFields, "show-managed-fields", false, "keep managedFields in the objects printed by -o yaml and -o json")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func runAdmit(ctx context.Context, cmd *cobra.Command, o *admitOptions) error {
	switch o.output {
	case "text", "yaml", "json":
	default:
		return fmt.Errorf("unknown output format %q (want text, yaml or json)", o.output)
	}
	switch o.fieldValidation {
	case metav1.FieldValidationStrict, metav1.FieldValidationWarn, metav1.FieldValidationIgnore:
	default:
		return fmt.Errorf("unknown --field-validation %q (want Strict, Warn or Ignore)", o.fieldValidation)
	}
	if len(o.groups) > 0 && o.user == "" {
		return fmt.Errorf("--group needs --user")
	}
	lopts, err := o.limitFlags.options()
	if err != nil {
		return err
	}
	lopts.Stdin = cmd.InOrStdin()
	writes, err := manifest.LoadPaths(ctx, o.files, lopts)
	if err != nil {
		return err
	}
	if len(writes) == 0 {
		return fmt.Errorf("no objects found in %s", strings.Join(o.files, ", "))
	}

	var results []*admission.Result
	switch o.dryRun {
	case "":
		results, err = admitOffline(ctx, o, writes)
	case "server":
		if len(o.cluster) > 0 {
			return fmt.Errorf("--dry-run=server asks a real cluster; -c describes an offline one: use one or the other")
		}
		results, err = admitLive(ctx, o, writes)
	default:
		return fmt.Errorf("unknown --dry-run %q (only \"server\" is supported)", o.dryRun)
	}
	if err != nil {
		return err
	}
	if !o.showManagedFields {
		hideManagedFields(results)
	}
	if err := printResults(cmd.OutOrStdout(), o.output, results); err != nil {
		return err
	}
	for _, r := range results {
		if !r.Allowed {
			return exitError{exitFound}
		}
	}
	return nil
}

func admitOffline(ctx context.Context, o *admitOptions, writes []manifest.Object) ([]*admission.Result, error) {
	state, opts, clusterObjs, err := o.clusterFlags.load(ctx)
	if err != nil {
		return nil, err
	}
	opts.FieldValidation = o.fieldValidation
	// Objects of -c are taken to have been created from their files.
	opts.StateFieldManager = admission.KubectlCreate
	chain, err := admission.NewChain(ctx, state, opts)
	if err != nil {
		return nil, admission.WithSource(err, clusterObjs)
	}
	defer func() { chain.Close() }()

	request := func(i int, op admission.Operation) (admission.Request, error) {
		w := writes[i]
		return admission.Request{
			Source: w.Source.String(), Object: w.Object, User: o.user, Groups: o.groups,
			FieldManager: o.fieldManagerFor(op),
		}, nil
	}
	// Writes that commute are admitted on every core, their results in
	// input order as if admitted one after the other.
	results, last, err := admission.AdmitInOrder(ctx, chain, len(writes), request, runtime.GOMAXPROCS(0))
	chain = last
	if err != nil {
		return nil, err
	}
	return results, nil
}

// hideManagedFields drops managedFields from the stored objects, as kubectl
// prints objects unless --show-managed-fields.
func hideManagedFields(results []*admission.Result) {
	for _, r := range results {
		if md, ok := r.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
	}
}

// parseEndpoints reads --webhook-endpoint NAMESPACE/SERVICE=URL flags.
func parseEndpoints(specs []string) (admission.WebhookEndpoints, error) {
	out := admission.WebhookEndpoints{}
	for _, s := range specs {
		key, u, ok := strings.Cut(s, "=")
		if !ok || strings.Count(key, "/") != 1 || u == "" {
			return nil, fmt.Errorf("--webhook-endpoint %q: want NAMESPACE/SERVICE=URL", s)
		}
		out[key] = u
	}
	return out, nil
}
