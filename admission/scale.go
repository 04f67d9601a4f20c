package admission

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	autoscalingvalidation "k8s.io/kubernetes/pkg/apis/autoscaling/validation"
	deploymentstorage "k8s.io/kubernetes/pkg/registry/apps/deployment/storage"
)

// ScaleRequest is kubectl scale --replicas: a JSON merge patch of the
// replicas of a Deployment's scale subresource.
type ScaleRequest struct {
	GroupVersionKind k8sschema.GroupVersionKind
	Namespace, Name  string
	Replicas         int32
	// FieldManager is the manager the write is recorded as (kubectl
	// scale sends none: the server records its user agent's prefix).
	FieldManager string
	// User and Groups as in Request; empty User is the cluster admin.
	User    string
	Groups  []string
	Persist bool
}

var (
	deploymentsResource = k8sschema.GroupResource{Group: "apps", Resource: "deployments"}
	scaleKind           = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
)

// AdmitScale runs kubectl scale's request through the server's path for
// it: authorization of the patch of deployments/scale, the patch handler
// applying the merge patch to the current Scale (the Deployment seen
// through the scale subresource, with its managedFields mapped by the
// upstream ScaleHandler), mutating admission of the Scale, the Scale's
// validation, the Deployment's registry strategy with the new replicas,
// and validating admission of the Scale. The Result's Object is the Scale
// the server answers with; the Deployment it would store goes to Commit.
func (c *Chain) AdmitScale(ctx context.Context, req ScaleRequest) (*Result, error) {
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	resource, err := c.registry.ForKind(req.GroupVersionKind)
	if err != nil {
		return nil, err
	}
	if resource.CRD != nil || resource.GVR.GroupResource() != deploymentsResource {
		return nil, fmt.Errorf("truce models the scale subresource of deployments.apps, not of %s", resource.GVR.GroupResource())
	}
	namespace := objectNamespace(resource, req.Namespace)
	res := &Result{Operation: Update, APIVersion: scaleKind.GroupVersion().String(), Kind: scaleKind.Kind,
		Namespace: namespace, Name: req.Name, Warnings: []string{}, Changes: []Change{}}
	fail := func(err error) (*Result, error) {
		status := statusOf(err)
		res.Allowed = false
		res.Code, res.Reason, res.Message, res.Details = status.Code, string(status.Reason), status.Message, status.Details
		return res, nil
	}
	userInfo := c.userInfo(Request{User: req.User, Groups: req.Groups})
	rec := &recorder{}
	ctx, warnings, err := requestScopeFor(ctx, rec, resource, "patch", "scale", namespace, req.Name, userInfo)
	if err != nil {
		return nil, err
	}
	defer func() {
		res.Warnings = append(res.Warnings, warnings.list()...)
		res.AuditAnnotations = audit.AuditContextFrom(ctx).GetEventAnnotations()
		if res.AuditAnnotations == nil {
			res.AuditAnnotations = map[string]string{}
		}
	}()
	if s := c.authorize(ctx, resource, "patch", "scale", namespace, req.Name, userInfo); s != nil {
		res.Allowed = false
		res.Code, res.Reason, res.Message, res.Details = s.Code, string(s.Reason), s.Message, s.Details
		return res, nil
	}
	existing, ok := c.state.Get(req.GroupVersionKind.GroupKind(), namespace, req.Name)
	if !ok {
		return fail(apierrors.NewNotFound(resource.GVR.GroupResource(), req.Name))
	}
	cd, strategy, err := c.handlerFor(resource)
	if err != nil {
		return nil, err
	}
	decoded, err := cd.decode(ctx, existing, metav1.FieldValidationIgnore)
	if err != nil {
		return nil, fmt.Errorf("decoding the stored object: %w", err)
	}
	old, ok := decoded.(*apps.Deployment)
	if !ok {
		return nil, fmt.Errorf("stored deployment decoded as %T", decoded)
	}
	if old.ResourceVersion == "" {
		// What a store would have (see checkResourceVersion).
		old.ResourceVersion = "1"
	}

	// The scale subresource's update (scaleUpdatedObjectInfo).
	mf := managedfields.NewScaleHandler(old.ManagedFields, resource.GVR.GroupVersion(), deploymentstorage.ReplicasPathMappings())
	oldScale, err := scaleFromDeployment(old)
	if err != nil {
		return fail(apierrors.NewBadRequest(err.Error()))
	}
	if oldScale.ManagedFields, err = mf.ToSubresource(); err != nil {
		return nil, err
	}
	// The patch handler: kubectl scale's merge patch of the Scale in the
	// request's version, the writer's fields recorded.
	newScale, err := c.patchScale(ctx, oldScale, req.Replicas)
	if err != nil {
		return fail(err)
	}
	fm, err := c.scaleFieldManager()
	if err != nil {
		return nil, err
	}
	manager := req.FieldManager
	if manager == "" {
		manager = DefaultFieldManager
	}
	newScale = fm.UpdateNoErrors(oldScale, newScale, manager).(*autoscaling.Scale)
	var dryRun []string
	if !req.Persist {
		dryRun = []string{metav1.DryRunAll}
	}
	options := &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"}, DryRun: dryRun}
	attrs := k8sadmission.NewAttributesRecord(newScale, oldScale, scaleKind, namespace, req.Name, resource.GVR, "scale",
		k8sadmission.Update, options, !req.Persist, userInfo)
	if err := c.admit.(k8sadmission.MutationInterface).Admit(ctx, attrs, c.objects); err != nil {
		return fail(err)
	}
	newScale, ok = attrs.GetObject().(*autoscaling.Scale)
	if !ok {
		return fail(apierrors.NewBadRequest(fmt.Sprintf("expected input object type to be Scale, but %T", attrs.GetObject())))
	}
	if errs := autoscalingvalidation.ValidateScaleUpdate(ctx, newScale, oldScale, legacyscheme.Scheme, &deploymentstorage.ScaleREST{}); len(errs) > 0 {
		return fail(apierrors.NewInvalid(autoscaling.Kind("Scale"), old.Name, errs))
	}
	updated := old.DeepCopy()
	updated.Spec.Replicas = newScale.Spec.Replicas
	updated.ResourceVersion = newScale.ResourceVersion
	if updated.ManagedFields, err = mf.ToParent(newScale.ManagedFields); err != nil {
		return nil, err
	}

	// The Deployment store's update, its validation seen as Scales.
	if err := rest.BeforeUpdate(strategy, ctx, updated, old); err != nil {
		return fail(err)
	}
	finalScale, err := scaleFromDeployment(updated)
	if err != nil {
		return fail(err)
	}
	finalOld, err := scaleFromDeployment(old)
	if err != nil {
		return fail(err)
	}
	final := k8sadmission.NewAttributesRecord(finalScale, finalOld, scaleKind, namespace, req.Name, resource.GVR, "scale",
		k8sadmission.Update, options, !req.Persist, userInfo)
	if err := c.admit.(k8sadmission.ValidationInterface).Validate(ctx, final, c.objects); err != nil {
		return fail(err)
	}
	stored, err := cd.encode(updated, req.GroupVersionKind)
	if err != nil {
		return nil, err
	}
	answer, err := scaleFromDeployment(updated)
	if err != nil {
		return fail(err)
	}
	out, err := codecFor("autoscaling").encode(answer, scaleKind)
	if err != nil {
		return nil, err
	}
	res.Allowed = true
	res.Object = out.Object
	res.Stored = stored.Object
	return res, nil
}

// patchScale applies kubectl scale's merge patch to the current Scale as
// the patch handler does: in the request's version, decoded back into the
// internal type.
func (c *Chain) patchScale(ctx context.Context, current *autoscaling.Scale, replicas int32) (*autoscaling.Scale, error) {
	cd := codecFor("autoscaling")
	versioned, err := cd.encode(current.DeepCopy(), scaleKind)
	if err != nil {
		return nil, err
	}
	currentJSON, err := json.Marshal(versioned.Object)
	if err != nil {
		return nil, err
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	patched, err := jsonpatch.MergePatch(currentJSON, patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj, err := cd.decodeBytes(ctx, patched, scaleKind, metav1.FieldValidationStrict)
	if err != nil {
		return nil, err
	}
	scale, ok := obj.(*autoscaling.Scale)
	if !ok {
		return nil, fmt.Errorf("scale decoded as %T", obj)
	}
	return scale, nil
}

// scaleFieldManager is the patch handler's field manager for the Scale of
// deployments/scale.
func (c *Chain) scaleFieldManager() (*managedfields.FieldManager, error) {
	c.fmMu.Lock()
	defer c.fmMu.Unlock()
	key := k8sschema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments/scale"}
	if fm, ok := c.fieldManagers[key]; ok {
		return fm, nil
	}
	tc, err := c.registry.TypeConverter(scaleKind.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("type information for %s: %w", scaleKind.GroupVersion(), err)
	}
	s := legacyscheme.Scheme
	hub := k8sschema.GroupVersion{Group: "autoscaling", Version: runtime.APIVersionInternal}
	fm, err := managedfields.NewDefaultFieldManager(tc, runtime.UnsafeObjectConvertor(s), s, s, scaleKind, hub, "scale", nil)
	if err != nil {
		return nil, fmt.Errorf("field manager for deployments/scale: %w", err)
	}
	c.fieldManagers[key] = fm
	return fm, nil
}

// scaleFromDeployment is the Deployment registry's view of a Deployment
// through its scale subresource (k8s.io/kubernetes/pkg/registry/apps/
// deployment/storage, unexported there).
func scaleFromDeployment(d *apps.Deployment) (*autoscaling.Scale, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return &autoscaling.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID,
			ResourceVersion: d.ResourceVersion, CreationTimestamp: d.CreationTimestamp},
		Spec:   autoscaling.ScaleSpec{Replicas: d.Spec.Replicas},
		Status: autoscaling.ScaleStatus{Replicas: d.Status.Replicas, Selector: selector.String()},
	}, nil
}
