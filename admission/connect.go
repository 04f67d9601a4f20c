package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
)

// ConnectRequest is a CONNECT to a pod's exec or attach subresource, as
// kubectl exec and kubectl attach open it.
type ConnectRequest struct {
	// Subresource is "exec" or "attach".
	Subresource     string
	Namespace, Name string
	// Container, Command, Stdin, Stdout, Stderr and TTY are the request's
	// parameters (PodExecOptions, or PodAttachOptions without Command).
	Container                  string
	Command                    []string
	Stdin, Stdout, Stderr, TTY bool
	// User and Groups as in Request; empty User is the cluster admin.
	User   string
	Groups []string
}

var podKind = k8sschema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// AdmitConnect runs a CONNECT through the server's connect handler
// (k8s.io/apiserver/pkg/endpoints/handlers/rest.go ConnectResource):
// authorization of the subresource (kubectl opens exec and attach with a
// POST, or a websocket GET the server also authorizes as create), the
// query parameters decoded into the internal options object by the
// server's parameter codec, then mutating and validating admission with
// that object, no old object and no options. A pod that does not exist is
// answered 404 after admission, as the connecter is. Nothing is stored:
// the Result has no Object.
func (c *Chain) AdmitConnect(ctx context.Context, req ConnectRequest) (*Result, error) {
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	resource, err := c.registry.ForKind(podKind)
	if err != nil {
		return nil, err
	}
	var versioned, internal runtime.Object
	var kind string
	switch req.Subresource {
	case "exec":
		kind = "PodExecOptions"
		versioned = &corev1.PodExecOptions{Container: req.Container, Command: req.Command,
			Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, TTY: req.TTY}
		internal = &api.PodExecOptions{}
	case "attach":
		kind = "PodAttachOptions"
		versioned = &corev1.PodAttachOptions{Container: req.Container,
			Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, TTY: req.TTY}
		internal = &api.PodAttachOptions{}
	default:
		return nil, fmt.Errorf("unknown connect subresource %q (want exec or attach)", req.Subresource)
	}
	namespace := objectNamespace(resource, req.Namespace)
	res := &Result{Operation: Connect, APIVersion: "v1", Kind: kind, Namespace: namespace, Name: req.Name,
		Warnings: []string{}, Changes: []Change{}}
	fail := func(status *metav1.Status) (*Result, error) {
		res.Allowed = false
		res.Code, res.Reason, res.Message, res.Details = status.Code, string(status.Reason), status.Message, status.Details
		return res, nil
	}
	// The client encodes the options as query parameters; the server
	// decodes them into the internal type.
	query, err := clientscheme.ParameterCodec.EncodeParameters(versioned, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s parameters: %w", kind, err)
	}
	if err := legacyscheme.ParameterCodec.DecodeParameters(query, corev1.SchemeGroupVersion, internal); err != nil {
		return fail(statusOf(apierrors.NewBadRequest(err.Error())))
	}
	userInfo := c.userInfo(Request{User: req.User, Groups: req.Groups})
	ctx, warnings, err := requestScopeFor(ctx, &recorder{}, resource, "create", req.Subresource, namespace, req.Name, userInfo)
	if err != nil {
		return nil, err
	}
	if s := c.authorize(ctx, resource, "create", req.Subresource, namespace, req.Name, userInfo); s != nil {
		return fail(s)
	}
	optionsKind := corev1.SchemeGroupVersion.WithKind(kind)
	attrs := func() k8sadmission.Attributes {
		return k8sadmission.NewAttributesRecord(internal, nil, optionsKind, namespace, req.Name, resource.GVR,
			req.Subresource, k8sadmission.Connect, nil, false, userInfo)
	}
	if m, ok := c.admit.(k8sadmission.MutationInterface); ok && m.Handles(k8sadmission.Connect) {
		if err := m.Admit(ctx, attrs(), c.objects); err != nil {
			return fail(statusOf(err))
		}
	}
	if v, ok := c.admit.(k8sadmission.ValidationInterface); ok && v.Handles(k8sadmission.Connect) {
		if err := v.Validate(ctx, attrs(), c.objects); err != nil {
			return fail(statusOf(err))
		}
	}
	res.Warnings = append(res.Warnings, warnings.list()...)
	res.AuditAnnotations = audit.AuditContextFrom(ctx).GetEventAnnotations()
	if res.AuditAnnotations == nil {
		res.AuditAnnotations = map[string]string{}
	}
	if _, ok := c.state.Get(podKind.GroupKind(), namespace, req.Name); !ok {
		return fail(&apierrors.NewNotFound(resource.GVR.GroupResource(), req.Name).ErrStatus)
	}
	res.Allowed = true
	res.Notes = append(res.Notes, "admission allowed the CONNECT; the server then opens the stream to the kubelet, which truce does not model")
	return res, nil
}
