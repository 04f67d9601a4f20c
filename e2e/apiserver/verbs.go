package apiserver

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
)

// The operations of the other verbs.
const (
	OperationDelete  Operation = "DELETE"
	OperationConnect Operation = "CONNECT"
)

// WithForce sets a patch's force parameter (server-side apply's
// --force-conflicts).
func WithForce(force bool) DryRunOption {
	return func(o *dryRunOptions) { o.force = &force }
}

// DryRunPatch sends a PATCH of obj (its apiVersion, kind, namespace and
// name; of its subresource when not empty) as a server-side dry run, as
// DryRunCreate does: the admission operation is UPDATE (CREATE for an
// apply patch of an object that does not exist; Operation says UPDATE
// either way).
func (s *Server) DryRunPatch(ctx context.Context, obj *unstructured.Unstructured, pt types.PatchType, patch []byte, subresource, user string, groups []string, opts ...DryRunOption) (*DryRunResult, error) {
	var o dryRunOptions
	for _, opt := range opts {
		opt(&o)
	}
	return s.retry(ctx, func(ctx context.Context, auditID string) (*DryRunResult, error) {
		client, err := s.dynamicFor(user, groups)
		if err != nil {
			return nil, err
		}
		ri, ref, err := s.resourceInterface(ctx, client, obj.DeepCopy())
		if err != nil {
			return nil, err
		}
		rctx, info := withRequestInfo(ctx, auditID)
		var sub []string
		if subresource != "" {
			sub = []string{subresource}
		}
		out, err := ri.Patch(rctx, ref.name, pt, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll},
			FieldValidation: o.fieldValidation, FieldManager: o.fieldManager, Force: o.force}, sub...)
		return answer(Update, auditID, info, out, err, ref)
	})
}

// DryRunDelete sends a DELETE of obj as a server-side dry run with the
// propagation policy (none when empty).
func (s *Server) DryRunDelete(ctx context.Context, obj *unstructured.Unstructured, propagation metav1.DeletionPropagation, user string, groups []string) (*DryRunResult, error) {
	return s.retry(ctx, func(ctx context.Context, auditID string) (*DryRunResult, error) {
		client, err := s.dynamicFor(user, groups)
		if err != nil {
			return nil, err
		}
		ri, ref, err := s.resourceInterface(ctx, client, obj.DeepCopy())
		if err != nil {
			return nil, err
		}
		rctx, info := withRequestInfo(ctx, auditID)
		opts := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		if propagation != "" {
			opts.PropagationPolicy = &propagation
		}
		return answer(OperationDelete, auditID, info, nil, ri.Delete(rctx, ref.name, opts), ref)
	})
}

// ConnectExec opens pods/exec of a pod as the admin, with the parameters
// kubectl exec sends, without upgrading the connection: admission answers
// first. An exec admission allows is then refused by the connecter (the
// test server runs no kubelet), so the result's Status is set either way;
// AdmittedConnect tells the two apart.
func (s *Server) ConnectExec(ctx context.Context, namespace, pod string, opts *corev1.PodExecOptions) (*DryRunResult, error) {
	return s.retry(ctx, func(ctx context.Context, auditID string) (*DryRunResult, error) {
		rctx, info := withRequestInfo(ctx, auditID)
		err := s.client.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).
			SubResource("exec").VersionedParams(opts, scheme.ParameterCodec).Do(rctx).Error()
		return answer(OperationConnect, auditID, info, nil, err, objectRef{name: pod, namespace: namespace})
	})
}

// AdmittedConnect reports whether a CONNECT got past admission: the test
// server has no node, so an admitted exec ends in the connecter's error.
func AdmittedConnect(res *DryRunResult) bool {
	if res.Status == nil {
		return true
	}
	st := res.Status.ErrStatus
	return st.Code == 400 || (st.Code == 404 && st.Reason == metav1.StatusReasonNotFound)
}

func answer(op Operation, auditID string, info *requestInfo, out *unstructured.Unstructured, err error, ref objectRef) (*DryRunResult, error) {
	res := &DryRunResult{Operation: op, AuditID: auditID, Warnings: info.Warnings(), Attempts: 1}
	if err != nil {
		var se *apierrors.StatusError
		if errors.As(err, &se) {
			res.Status = se
			return res, nil
		}
		return nil, fmt.Errorf("dry-run %s %s: %w", op, ref, err)
	}
	res.Object = out
	return res, nil
}

// retry makes a request until it is not refused for warm-up (IsTransient),
// for up to TransientTimeout, as DryRunCreate does.
func (s *Server) retry(ctx context.Context, once func(ctx context.Context, auditID string) (*DryRunResult, error)) (*DryRunResult, error) {
	var last *DryRunResult
	attempts := 0
	err := wait.PollUntilContextTimeout(ctx, transientRetryInterval, TransientTimeout, true, func(ctx context.Context) (bool, error) {
		attempts++
		res, err := once(ctx, "truce-e2e-"+string(uuid.NewUUID()))
		if err != nil {
			return false, err
		}
		last = res
		return !IsTransient(res.Status), nil
	})
	if last != nil {
		last.Attempts = attempts
	}
	if err != nil && last != nil && IsTransient(last.Status) {
		return last, fmt.Errorf("server still warming up after %s (%d attempts): %w", TransientTimeout, attempts, last.Status)
	}
	return last, err
}

// Get reads obj's live version as the admin (in obj's version), or nil
// when it does not exist: what kubectl reads before an apply.
func (s *Server) Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, ref, err := s.resourceInterface(ctx, s.dynamic, obj.DeepCopy())
	if err != nil {
		return nil, err
	}
	live, err := ri.Get(ctx, ref.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	return live, nil
}
