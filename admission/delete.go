package admission

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// DeleteRequest is a DELETE of one stored object.
type DeleteRequest struct {
	GroupVersionKind k8sschema.GroupVersionKind
	Namespace, Name  string
	// User and Groups as in Request; empty User is the cluster admin.
	User   string
	Groups []string
	// Persist is false for a dry run.
	Persist bool
	// PropagationPolicy is the DeleteOptions' (kubectl delete sends
	// Background unless --cascade says otherwise); empty sends none.
	PropagationPolicy metav1.DeletionPropagation
	// GracePeriodSeconds is the DeleteOptions' (kubectl delete
	// --grace-period); nil sends none.
	GracePeriodSeconds *int64
}

// AdmitDelete runs a DELETE through the server's path for it: authorization,
// then mutating admission and validating admission with the stored object
// as oldObject (the delete handler and the store's deleteValidation), so
// that NamespaceLifecycle refuses to delete default, kube-system and
// kube-public, and policies and webhooks matching DELETE answer. It stores
// nothing; the Result has no Object.
func (c *Chain) AdmitDelete(ctx context.Context, req DeleteRequest) (*Result, error) {
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	gvk := req.GroupVersionKind
	resource, err := c.registry.ForKind(gvk)
	if err != nil {
		return nil, err
	}
	res := &Result{Operation: Delete, APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: req.Name,
		Warnings: []string{}, Changes: []Change{}}
	res.Namespace = objectNamespace(resource, req.Namespace)
	namespace := res.Namespace
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		namespace = req.Name
	}
	fail := func(status *metav1.Status) (*Result, error) {
		res.Allowed = false
		res.Code, res.Reason, res.Message, res.Details = status.Code, string(status.Reason), status.Message, status.Details
		return res, nil
	}
	existing, ok := c.state.Get(gvk.GroupKind(), res.Namespace, req.Name)
	if !ok {
		return fail(&apierrors.NewNotFound(resource.GVR.GroupResource(), req.Name).ErrStatus)
	}
	userInfo := c.userInfo(Request{User: req.User, Groups: req.Groups})
	ctx, warnings, err := requestScope(ctx, &recorder{}, resource, "delete", namespace, req.Name, userInfo)
	if err != nil {
		return nil, err
	}
	authzNamespace := namespace
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		authzNamespace = ""
	}
	if s := c.authorize(ctx, resource, "delete", "", authzNamespace, req.Name, userInfo); s != nil {
		return fail(s)
	}
	codec, _, err := c.handlerFor(resource)
	if err != nil {
		return nil, err
	}
	old, err := codec.decode(ctx, existing, metav1.FieldValidationIgnore)
	if err != nil {
		return nil, fmt.Errorf("decoding the stored object: %w", err)
	}
	var dryRun []string
	if !req.Persist {
		dryRun = []string{metav1.DryRunAll}
	}
	options := &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}, DryRun: dryRun,
		GracePeriodSeconds: req.GracePeriodSeconds}
	if req.PropagationPolicy != "" {
		policy := req.PropagationPolicy
		options.PropagationPolicy = &policy
	}
	attrs := k8sadmission.NewAttributesRecord(nil, old, resource.GVK(), namespace, req.Name, resource.GVR, "",
		k8sadmission.Delete, options, !req.Persist, userInfo)
	if m, ok := c.admit.(k8sadmission.MutationInterface); ok && m.Handles(k8sadmission.Delete) {
		if err := m.Admit(ctx, attrs, c.objects); err != nil {
			return fail(statusOf(err))
		}
	}
	if v, ok := c.admit.(k8sadmission.ValidationInterface); ok && v.Handles(k8sadmission.Delete) {
		if err := v.Validate(ctx, attrs, c.objects); err != nil {
			return fail(statusOf(err))
		}
	}
	res.Allowed = true
	if f := existing.GetFinalizers(); len(f) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the object has finalizers (%s): the server marks it for deletion (deletionTimestamp) and keeps it until they are removed", strings.Join(f, ", ")))
	}
	res.Warnings = append(res.Warnings, warnings.list()...)
	res.AuditAnnotations = audit.AuditContextFrom(ctx).GetEventAnnotations()
	if res.AuditAnnotations == nil {
		res.AuditAnnotations = map[string]string{}
	}
	return res, nil
}

// statusOf turns an admission error into the status the server answers.
func statusOf(err error) *metav1.Status { return responsewriters.ErrorToAPIStatus(err) }
