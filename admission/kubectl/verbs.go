package kubectl

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/cmd/util/podcmd"

	"github.com/truce-dev/truce/admission"
)

// Verb is the kubectl command a write is made as.
type Verb string

// The verbs truce admit speaks.
const (
	// Apply is kubectl apply: client-side, a create or a patch.
	Apply Verb = "apply"
	// ServerSideApply is kubectl apply --server-side.
	ServerSideApply Verb = "server-side"
	// Replace is kubectl create for a new object and kubectl replace (a
	// PUT of the whole object) for an existing one.
	Replace Verb = "replace"
	// Delete is kubectl delete.
	Delete Verb = "delete"
	// Scale is kubectl scale: a merge patch of the scale subresource.
	Scale Verb = "scale"
	// PatchVerb is kubectl patch.
	PatchVerb Verb = "patch"
	// Exec and Attach are kubectl exec and kubectl attach: a CONNECT.
	Exec   Verb = "exec"
	Attach Verb = "attach"
)

// Options are the flags of the kubectl command.
type Options struct {
	Verb Verb
	// FieldManager is --field-manager; empty is kubectl's default for
	// the command.
	FieldManager string
	// ForceConflicts is kubectl apply --server-side --force-conflicts.
	ForceConflicts bool
	// PatchType and Patch are kubectl patch's --type and --patch.
	PatchType types.PatchType
	Patch     []byte
	// Replicas is kubectl scale's --replicas.
	Replicas int32
	// Cascade is kubectl delete's --cascade as a propagation policy;
	// empty is kubectl's default, background.
	Cascade metav1.DeletionPropagation
	// Container, Command, Stdin and TTY are kubectl exec's and kubectl
	// attach's -c, the command after --, -i and -t.
	Container  string
	Command    []string
	Stdin, TTY bool
	// User and Groups make the request; empty User is the cluster admin.
	User   string
	Groups []string
	// Persist makes the write one that is stored (not a dry run).
	Persist bool
}

// Admit sends the request kubectl's command makes for obj (the manifest;
// for exec and attach, the pod) through the chain and returns the
// server's answer. It stores nothing; Chain.Commit does.
func Admit(ctx context.Context, chain *admission.Chain, source string, obj *unstructured.Unstructured, o Options) (*admission.Result, error) {
	req := admission.Request{Source: source, Object: obj, User: o.User, Groups: o.Groups,
		FieldManager: o.FieldManager, Persist: o.Persist}
	switch o.Verb {
	case Apply, "":
		return clientSideApply(ctx, chain, req)
	case ServerSideApply:
		if req.FieldManager == "" {
			req.FieldManager = ServerSideApplyManager
		}
		req.Apply, req.Force = true, o.ForceConflicts
		return chain.Admit(ctx, req)
	case Replace:
		if req.FieldManager == "" {
			op, err := chain.Operation(obj)
			if err != nil {
				return nil, err
			}
			req.FieldManager = admission.KubectlFieldManager(op)
		}
		return chain.Admit(ctx, req)
	case PatchVerb:
		if req.FieldManager == "" {
			req.FieldManager = PatchManager
		}
		req.PatchType, req.Patch = o.PatchType, o.Patch
		if req.PatchType == "" {
			req.PatchType = types.StrategicMergePatchType
		}
		return chain.Admit(ctx, req)
	case Delete:
		cascade := o.Cascade
		if cascade == "" {
			cascade = metav1.DeletePropagationBackground
		}
		res, err := chain.AdmitDelete(ctx, admission.DeleteRequest{GroupVersionKind: obj.GroupVersionKind(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), User: o.User, Groups: o.Groups,
			Persist: o.Persist, PropagationPolicy: cascade})
		if res != nil {
			res.Source = source
		}
		return res, err
	case Scale:
		manager := o.FieldManager
		if manager == "" {
			manager = ScaleManager
		}
		res, err := chain.AdmitScale(ctx, admission.ScaleRequest{GroupVersionKind: obj.GroupVersionKind(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), Replicas: o.Replicas, FieldManager: manager,
			User: o.User, Groups: o.Groups, Persist: o.Persist})
		if res != nil {
			res.Source = source
		}
		return res, err
	case Exec, Attach:
		return connect(ctx, chain, source, obj, o)
	}
	return nil, fmt.Errorf("unknown verb %q", o.Verb)
}

// clientSideApply is kubectl apply: read the object, then create it with
// the last-applied annotation or send the three-way patch.
func clientSideApply(ctx context.Context, chain *admission.Chain, req admission.Request) (*admission.Result, error) {
	if req.FieldManager == "" {
		req.FieldManager = ClientSideApplyManager
	}
	live, ok, err := chain.Live(req.Object)
	if err != nil {
		return nil, err
	}
	if !ok {
		live = nil
	}
	a, err := ClientSideApply(req.Object, live)
	if err != nil {
		return nil, err
	}
	switch {
	case a.Create:
		req.Object = a.Object
	case a.Unchanged:
		return &admission.Result{Source: req.Source, Operation: admission.Update, APIVersion: live.GetAPIVersion(),
			Kind: live.GetKind(), Namespace: live.GetNamespace(), Name: live.GetName(), Allowed: true,
			Object: live.Object, Warnings: []string{}, Changes: []admission.Change{}, AuditAnnotations: map[string]string{},
			Notes: []string{"unchanged: the patch is empty, so kubectl apply sends no request"}}, nil
	default:
		req.PatchType, req.Patch = a.PatchType, a.Patch
	}
	return chain.Admit(ctx, req)
}

// connect is kubectl exec and kubectl attach: the container defaults as
// kubectl picks it, stdout and stderr are streamed (stderr not with a
// TTY).
func connect(ctx context.Context, chain *admission.Chain, source string, pod *unstructured.Unstructured, o Options) (*admission.Result, error) {
	container := o.Container
	if container == "" {
		live, ok, err := chain.Live(pod)
		if err != nil {
			return nil, err
		}
		if ok {
			var typed corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, &typed); err != nil {
				return nil, fmt.Errorf("reading pod %s: %w", pod.GetName(), err)
			}
			var warn bytes.Buffer
			c, err := podcmd.FindOrDefaultContainerByName(&typed, "", true, &warn)
			if err != nil {
				return nil, err
			}
			container = c.Name
		}
	}
	req := admission.ConnectRequest{Subresource: string(o.Verb), Namespace: pod.GetNamespace(), Name: pod.GetName(),
		Container: container, Stdin: o.Stdin, Stdout: true, Stderr: !o.TTY, TTY: o.TTY, User: o.User, Groups: o.Groups}
	if o.Verb == Exec {
		req.Command = o.Command
	}
	res, err := chain.AdmitConnect(ctx, req)
	if res != nil {
		res.Source = source
	}
	return res, err
}
