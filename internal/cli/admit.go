package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/admission/kubectl"
	"github.com/truce-dev/truce/manifest"
)

// podRef is the pod --exec and --attach name.
func podRef(name, namespace string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetName(name)
	u.SetNamespace(namespace)
	return u
}

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

	// The verb: kubectl apply unless one of these is set.
	serverSide, forceConflicts, replace, delete bool
	cascade                                     string
	scale, currentReplicas                      int32
	exec, attach, namespace, container          string
	stdin, tty                                  bool
	patch, patchType                            string
	command                                     []string
}

// fieldManagerFor is the field manager of a write of op: --field-manager,
// or what kubectl create (a CREATE) or kubectl replace (an UPDATE) sends.
func (o *admitOptions) fieldManagerFor(op admission.Operation) string {
	if o.fieldManager != "" {
		return o.fieldManager
	}
	return admission.KubectlFieldManager(op)
}

// verb reads the verb flags into the options of the kubectl command they
// name.
func (o *admitOptions) verb(cmd *cobra.Command) (kubectl.Options, error) {
	k := kubectl.Options{Verb: kubectl.Apply, FieldManager: o.fieldManager, User: o.user, Groups: o.groups}
	var set []string
	pick := func(flag string, v kubectl.Verb) {
		if cmd.Flags().Changed(flag) {
			set = append(set, "--"+flag)
			k.Verb = v
		}
	}
	pick("server-side", kubectl.ServerSideApply)
	pick("replace", kubectl.Replace)
	pick("delete", kubectl.Delete)
	pick("scale", kubectl.Scale)
	pick("patch", kubectl.PatchVerb)
	pick("exec", kubectl.Exec)
	pick("attach", kubectl.Attach)
	if len(set) > 1 {
		return k, fmt.Errorf("%s: give one verb", strings.Join(set, " and "))
	}
	need := func(flag string, verbs ...kubectl.Verb) error {
		if cmd.Flags().Changed(flag) && !slices.Contains(verbs, k.Verb) {
			return fmt.Errorf("--%s needs %s", flag, verbFlags(verbs))
		}
		return nil
	}
	for _, c := range []struct {
		flag  string
		verbs []kubectl.Verb
	}{
		{"force-conflicts", []kubectl.Verb{kubectl.ServerSideApply}},
		{"cascade", []kubectl.Verb{kubectl.Delete}},
		{"current-replicas", []kubectl.Verb{kubectl.Scale}},
		{"type", []kubectl.Verb{kubectl.PatchVerb}},
		{"container", []kubectl.Verb{kubectl.Exec, kubectl.Attach}},
		{"namespace", []kubectl.Verb{kubectl.Exec, kubectl.Attach}},
		{"stdin", []kubectl.Verb{kubectl.Exec, kubectl.Attach}},
		{"tty", []kubectl.Verb{kubectl.Exec, kubectl.Attach}},
	} {
		if err := need(c.flag, c.verbs...); err != nil {
			return k, err
		}
	}
	if len(o.command) > 0 && k.Verb != kubectl.Exec {
		return k, fmt.Errorf("a command after -- needs --exec")
	}
	switch k.Verb {
	case kubectl.ServerSideApply:
		k.ForceConflicts = o.forceConflicts
	case kubectl.Delete:
		switch o.cascade {
		case "background", "":
			k.Cascade = metav1.DeletePropagationBackground
		case "foreground":
			k.Cascade = metav1.DeletePropagationForeground
		case "orphan":
			k.Cascade = metav1.DeletePropagationOrphan
		default:
			return k, fmt.Errorf("unknown --cascade %q (want background, foreground or orphan)", o.cascade)
		}
	case kubectl.Scale:
		if o.scale < 0 {
			return k, fmt.Errorf("--scale %d: the replicas must not be negative", o.scale)
		}
		k.Replicas = o.scale
		switch {
		case o.currentReplicas < -1:
			return k, fmt.Errorf("--current-replicas %d: give -1 (no precondition) or the replicas the object must have", o.currentReplicas)
		case o.currentReplicas >= 0:
			current := o.currentReplicas
			k.CurrentReplicas = &current
		}
	case kubectl.PatchVerb:
		pt, err := admission.ParsePatchType(o.patchType)
		if err != nil {
			return k, fmt.Errorf("--type: %w", err)
		}
		patch, err := yaml.YAMLToJSON([]byte(o.patch))
		if err != nil {
			return k, fmt.Errorf("--patch: %w", err)
		}
		k.PatchType, k.Patch = pt, patch
	case kubectl.Exec, kubectl.Attach:
		if len(o.files) > 0 {
			return k, fmt.Errorf("--%s names the pod: -f is not used", k.Verb)
		}
		if k.Verb == kubectl.Exec && len(o.command) == 0 {
			return k, fmt.Errorf("--exec needs the command after --")
		}
		k.Container, k.Command, k.Stdin, k.TTY = o.container, o.command, o.stdin, o.tty
	}
	if k.Verb != kubectl.Exec && k.Verb != kubectl.Attach && len(o.files) == 0 {
		return k, fmt.Errorf("-f is required")
	}
	return k, nil
}

func verbFlags(verbs []kubectl.Verb) string {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = "--" + string(v)
	}
	return strings.Join(names, " or ")
}

func newAdmitCommand() *cobra.Command {
	o := &admitOptions{}
	cmd := &cobra.Command{
		Use:   "admit -f PATH... [-c PATH...] [--server-side|--replace|--delete|--scale N|--patch P] | admit --exec POD [-c PATH...] -- COMMAND...",
		Short: "Run writes through kube-apiserver's admission chain offline and show what would be stored",
		Long: `admit runs each object of -f as one write (in input order) through the admission
chain of kube-apiserver 1.37.2 against the cluster described by -c: API defaulting,
authorization, built-in mutating plugins, MutatingAdmissionPolicies, mutating
webhooks (with reinvocation), the resource's validation, Pod Security,
ValidatingAdmissionPolicies and validating webhooks. Each write is the request
kubectl sends for its command:

  (default)        kubectl apply: a CREATE carrying the last-applied-configuration
                   annotation when the object does not exist in the cluster
                   state, otherwise a PATCH with kubectl's three-way merge
                   (strategic merge; JSON merge for custom resources): fields
                   other writers set are kept
  --server-side    kubectl apply --server-side (--field-manager, --force-conflicts)
  --replace        kubectl create, or kubectl replace (a PUT of the whole object)
  --patch P        kubectl patch -p P --type strategic|merge|json
  --delete         kubectl delete (--cascade)
  --scale N        kubectl scale --replicas N: the scale subresource of a
                   Deployment, ReplicaSet, StatefulSet, ReplicationController
                   or custom resource whose CRD declares one
                   (--current-replicas)
  --exec POD -- CMD, --attach POD
                   kubectl exec and kubectl attach: a CONNECT (--namespace,
                   --container, -i, -t)

Admitted writes are added to the state, so later writes see them. Every write
is a dry run: webhooks are told dryRun: true (a CONNECT has no dry run).
docs/admit.md has the request the server sees for each.

managedFields are recorded for every write as the server records them: the
stored entries updated for the writer (--field-manager; by default what kubectl
sends: kubectl-client-side-apply for apply, kubectl for --server-side,
kubectl-create and kubectl-replace for --replace, kubectl-patch for --patch).
An object of -c without managedFields is taken to have been created with
kubectl create; give its real entries (kubectl get -o yaml
--show-managed-fields) to use them. -o yaml and -o json leave managedFields
out unless --show-managed-fields.

Exit status: 0 when every write is admitted, 1 when any is denied, 2 on error.`,
		Example: `  # What does the API server store for this Deployment, given these policies?
  truce admit -f examples/image-mirror/app -f examples/image-mirror/batch -c examples/image-mirror/cluster

  # The same, as JSON for CI
  truce admit -f app/ -c cluster/ -o json

  # Server-side apply, taking over fields other managers own
  truce admit -f app/ -c cluster/ --server-side --force-conflicts

  # May this user delete it? Scale it to 5? Exec into a pod?
  truce admit -f app/web.yaml -c cluster/ --delete --user alice
  truce admit -f app/web.yaml -c cluster/ --scale 5
  truce admit --exec web-0 --namespace shop -c cluster/ -- sh

  # Compare with a real cluster (server-side dry run)
  truce admit -f app/ --kubeconfig ~/.kube/config --dry-run=server`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); len(args) > 0 && dash != 0 {
				return fmt.Errorf("unexpected argument %q (the command of --exec goes after --)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.command = args
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
	f.StringVar(&o.fieldManager, "field-manager", "", "the writer's name in managedFields (default: what kubectl sends for the verb)")
	f.BoolVar(&o.showManagedFields, "show-managed-fields", false, "keep managedFields in the objects printed by -o yaml and -o json")
	f.BoolVar(&o.serverSide, "server-side", false, "server-side apply, as kubectl apply --server-side")
	f.BoolVar(&o.forceConflicts, "force-conflicts", false, "with --server-side: take over the fields other managers own instead of answering 409 Conflict")
	f.BoolVar(&o.replace, "replace", false, "create, or PUT the whole object, as kubectl create and kubectl replace")
	f.BoolVar(&o.delete, "delete", false, "delete the objects of -f, as kubectl delete")
	f.StringVar(&o.cascade, "cascade", "background", "with --delete: the propagation policy, background, foreground or orphan")
	f.Int32Var(&o.scale, "scale", 0, "scale the objects of -f to this many replicas through their scale subresource, as kubectl scale --replicas")
	f.Int32Var(&o.currentReplicas, "current-replicas", -1, "with --scale: scale only if the object has this many replicas now, as kubectl scale --current-replicas (-1: no precondition)")
	f.StringVar(&o.patch, "patch", "", "patch the objects of -f with this patch (JSON or YAML), as kubectl patch -p")
	f.StringVar(&o.patchType, "type", "strategic", "with --patch: strategic, merge or json")
	f.StringVar(&o.exec, "exec", "", "CONNECT to this pod's exec subresource with the command after --, as kubectl exec")
	f.StringVar(&o.attach, "attach", "", "CONNECT to this pod's attach subresource, as kubectl attach")
	f.StringVar(&o.namespace, "namespace", metav1.NamespaceDefault, "with --exec and --attach: the pod's namespace")
	f.StringVar(&o.container, "container", "", "with --exec and --attach: the container (default: kubectl's, the kubectl.kubernetes.io/default-container annotation or the first)")
	f.BoolVarP(&o.stdin, "stdin", "i", false, "with --exec and --attach: pass stdin")
	f.BoolVarP(&o.tty, "tty", "t", false, "with --exec and --attach: stdin is a TTY")
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
	verb, err := o.verb(cmd)
	if err != nil {
		return err
	}
	var writes []manifest.Object
	if pod := o.exec + o.attach; pod != "" {
		writes = []manifest.Object{{Object: podRef(pod, o.namespace)}}
	} else {
		lopts, err := o.limitFlags.options()
		if err != nil {
			return err
		}
		lopts.Stdin = cmd.InOrStdin()
		if writes, err = manifest.LoadPaths(ctx, o.files, lopts); err != nil {
			return err
		}
		if len(writes) == 0 {
			return fmt.Errorf("no objects found in %s", strings.Join(o.files, ", "))
		}
	}

	var results []*admission.Result
	switch o.dryRun {
	case "":
		results, err = admitOffline(ctx, cmd.ErrOrStderr(), o, verb, writes)
	case "server":
		if len(o.cluster) > 0 {
			return fmt.Errorf("--dry-run=server asks a real cluster; -c describes an offline one: use one or the other")
		}
		switch verb.Verb {
		case kubectl.Apply, kubectl.ServerSideApply, kubectl.Replace:
		default:
			return fmt.Errorf("--dry-run=server sends kubectl apply, apply --server-side and create/replace; --%s is offline only", verb.Verb)
		}
		results, err = admitLive(ctx, o, verb, writes)
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

func admitOffline(ctx context.Context, notes io.Writer, o *admitOptions, verb kubectl.Options, writes []manifest.Object) ([]*admission.Result, error) {
	state, opts, clusterObjs, err := o.clusterFlags.load(ctx)
	if err != nil {
		return nil, err
	}
	opts.FieldValidation = o.fieldValidation
	if opts.Engines, err = policyEngines(clusterObjs, writes); err != nil {
		return nil, err
	}
	defer printEngineNotes(notes, opts.Engines)
	// Objects of -c are taken to have been created from their files.
	opts.StateFieldManager = admission.KubectlCreate
	chain, err := admission.NewChain(ctx, state, opts)
	if err != nil {
		return nil, admission.WithSource(err, clusterObjs)
	}
	defer func() { chain.Close() }()

	if admitWorkers > 1 && batched(verb.Verb) {
		results, last, err := admission.AdmitInOrder(ctx, chain, kubectlWrites(writes, verb), admitWorkers)
		chain = last
		return results, err
	}
	results := make([]*admission.Result, 0, len(writes))
	for _, w := range writes {
		source := ""
		if w.Source.File != "" {
			source = w.Source.String()
		}
		res, err := kubectl.Admit(ctx, chain, source, w.Object, verb)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.Source, err)
		}
		results = append(results, res)
		reconfigure, err := chain.Commit(res)
		if verb.Verb == kubectl.Delete && res.Allowed {
			// Later writes see the object gone.
			reconfigure, err = chain.Remove(w.Object.GroupVersionKind().GroupKind(), res.Namespace, res.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.Source, err)
		}
		if reconfigure {
			chain.Close()
			if chain, err = admission.NewChain(ctx, state, opts); err != nil {
				return nil, fmt.Errorf("%s: recompiling admission after this write: %w", w.Source, err)
			}
		}
	}
	return results, nil
}

// admitWorkers is how many writes of a run admitOffline admits at once.
var admitWorkers = runtime.GOMAXPROCS(0)

// batched reports whether writes of verb may be admitted through
// admission.AdmitInOrder: creates, replaces and applies, each committed as
// it is admitted (a delete removes instead; scale, patch, exec and attach
// are of one object).
func batched(v kubectl.Verb) bool {
	return v == kubectl.Apply || v == kubectl.ServerSideApply || v == kubectl.Replace
}

// kubectlWrites are writes admitted as verb's kubectl command sends them
// (admission/kubectl builds the request on whichever goroutine admits it).
func kubectlWrites(writes []manifest.Object, verb kubectl.Options) []admission.Write {
	out := make([]admission.Write, len(writes))
	for i, w := range writes {
		source := ""
		if w.Source.File != "" {
			source = w.Source.String()
		}
		out[i] = admission.Write{Source: w.Source.String(), Object: w.Object,
			Admit: func(ctx context.Context, chain *admission.Chain) (*admission.Result, error) {
				return kubectl.Admit(ctx, chain, source, w.Object, verb)
			}}
	}
	return out
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
