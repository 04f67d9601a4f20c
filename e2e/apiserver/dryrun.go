package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Operation is the admission operation of a write.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// DryRunResult is what the server did with a dry-run write.
type DryRunResult struct {
	Operation Operation
	// AuditID is the Audit-ID the (last) request was sent with; pass it to
	// AuditAnnotations.
	AuditID string
	// Object is the object the server would have stored; nil if denied.
	Object *unstructured.Unstructured
	// Status is the error the server answered with; nil if admitted.
	Status *apierrors.StatusError
	// Warnings are the Warning headers of the (last) response, in the order
	// the server sent them.
	Warnings []string
	// Attempts counts the requests made: more than one when the first
	// answers were warm-up errors (see TransientTimeout).
	Attempts int
}

// Allowed reports whether the write was admitted.
func (r *DryRunResult) Allowed() bool { return r.Status == nil }

// TransientTimeout bounds how long DryRunCreate and DryRunUpdate retry while
// the server answers with one of the errors listed in transientMessages.
// These come from caches inside kube-apiserver that lag behind newly created
// CRDs and that no sentinel can observe: the admission RESTMapper used to
// resolve a policy's paramKind is only refreshed every 30 s, and the
// MutatingAdmissionPolicy type converter for custom resources every 5 s.
var TransientTimeout = 45 * time.Second

// transientMessages identify denials caused by warm-up, not by the policies.
var transientMessages = []string{
	// paramKind informer not synced yet (generic policy dispatcher).
	"not yet synced to use for admission",
	// paramKind not resolvable yet by the admission RESTMapper.
	"failed to find resource referenced by paramKind",
	// MutatingAdmissionPolicy on a custom resource whose schema the type
	// converter has not fetched yet.
	"There can be a delay between when CustomResourceDefinitions are created and when they are available",
}

// IsTransient reports whether a dry-run denial is a known warm-up error of
// kube-apiserver's admission caches rather than an answer of the policies.
func IsTransient(err *apierrors.StatusError) bool {
	if err == nil {
		return false
	}
	msg := err.ErrStatus.Message
	for _, m := range transientMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// DryRunOption modifies a dry-run request.
type DryRunOption func(*dryRunOptions)

type dryRunOptions struct {
	fieldValidation string
	fieldManager    string
	force           *bool
}

// WithFieldValidation sets the request's fieldValidation parameter
// ("Strict", "Warn" or "Ignore"). Without it the server applies the API's
// default, Warn; kubectl (and truce) default to Strict.
func WithFieldValidation(v string) DryRunOption {
	return func(o *dryRunOptions) { o.fieldValidation = v }
}

// WithFieldManager sets the request's fieldManager, the writer's name in
// managedFields. Without it the server takes the client's user agent
// ("truce-e2e").
func WithFieldManager(m string) DryRunOption {
	return func(o *dryRunOptions) { o.fieldManager = m }
}

// DryRunCreate sends obj as a server-side dry-run create (dryRun=All), as
// user with groups if user is set (impersonation; otherwise as the admin),
// and returns what the server answered: the object it would have stored, or
// the *errors.StatusError it denied with, plus the warnings. The returned
// error is for failures to get an answer at all.
//
// Warm-up denials (IsTransient) are retried for up to TransientTimeout; the
// result is that of the last request.
func (s *Server) DryRunCreate(ctx context.Context, obj *unstructured.Unstructured, user string, groups []string, opts ...DryRunOption) (*DryRunResult, error) {
	return s.dryRun(ctx, Create, obj, user, groups, opts)
}

// DryRunUpdate is DryRunCreate for an update (PUT) of an existing object. If
// obj carries no resourceVersion, the live object's is used, so the update
// is never refused for a conflict.
func (s *Server) DryRunUpdate(ctx context.Context, obj *unstructured.Unstructured, user string, groups []string, opts ...DryRunOption) (*DryRunResult, error) {
	return s.dryRun(ctx, Update, obj, user, groups, opts)
}

func (s *Server) dryRun(ctx context.Context, op Operation, obj *unstructured.Unstructured, user string, groups []string, opts []DryRunOption) (*DryRunResult, error) {
	var o dryRunOptions
	for _, opt := range opts {
		opt(&o)
	}
	var last *DryRunResult
	attempts := 0
	err := wait.PollUntilContextTimeout(ctx, transientRetryInterval, TransientTimeout, true, func(ctx context.Context) (bool, error) {
		attempts++
		res, err := s.dryRunOnce(ctx, op, obj, user, groups, "truce-e2e-"+string(uuid.NewUUID()), o)
		if err != nil {
			return false, err
		}
		last = res
		return !IsTransient(res.Status), nil
	})
	if last != nil {
		last.Attempts = attempts
	}
	if err != nil {
		if last != nil && IsTransient(last.Status) {
			return last, fmt.Errorf("server still warming up after %s (%d attempts): %w", TransientTimeout, attempts, last.Status)
		}
		return last, err
	}
	return last, nil
}

// dryRunOnce makes exactly one dry-run request with the given audit ID.
func (s *Server) dryRunOnce(ctx context.Context, op Operation, obj *unstructured.Unstructured, user string, groups []string, auditID string, o dryRunOptions) (*DryRunResult, error) {
	client, err := s.dynamicFor(user, groups)
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	ri, ref, err := s.resourceInterface(ctx, client, obj)
	if err != nil {
		return nil, err
	}
	dryRun := []string{metav1.DryRunAll}
	if op == Update && obj.GetResourceVersion() == "" {
		// Read as the admin: the impersonated user may not be allowed to
		// get the object, and the live version is not part of the case.
		adminRI, _, err := s.resourceInterface(ctx, s.dynamic, obj.DeepCopy())
		if err != nil {
			return nil, err
		}
		live, err := adminRI.Get(ctx, ref.name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get live %s for update: %w", ref, err)
		}
		obj.SetResourceVersion(live.GetResourceVersion())
	}

	rctx, info := withRequestInfo(ctx, auditID)
	var out *unstructured.Unstructured
	switch op {
	case Create:
		out, err = ri.Create(rctx, obj, metav1.CreateOptions{DryRun: dryRun, FieldValidation: o.fieldValidation, FieldManager: o.fieldManager})
	case Update:
		out, err = ri.Update(rctx, obj, metav1.UpdateOptions{DryRun: dryRun, FieldValidation: o.fieldValidation, FieldManager: o.fieldManager})
	default:
		return nil, fmt.Errorf("unsupported operation %q", op)
	}
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
