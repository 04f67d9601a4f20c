package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/registry/rest"
	kubectlscale "k8s.io/kubectl/pkg/scale"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	autoscalingvalidation "k8s.io/kubernetes/pkg/apis/autoscaling/validation"

	"github.com/truce-dev/truce/schema"
)

// ScaleRequest is kubectl scale --replicas: a JSON merge patch of the
// replicas through the scale subresource or, with --current-replicas, a
// GET of the Scale, kubectl's precondition check, and a PUT of it.
type ScaleRequest struct {
	GroupVersionKind k8sschema.GroupVersionKind
	Namespace, Name  string
	Replicas         int32
	// CurrentReplicas is kubectl scale's --current-replicas; nil sends
	// the merge patch without reading the Scale first.
	CurrentReplicas *int32
	// FieldManager is the manager the write is recorded as (kubectl
	// scale sends none: the server records its user agent's prefix).
	FieldManager string
	// User and Groups as in Request; empty User is the cluster admin.
	User    string
	Groups  []string
	Persist bool
}

var scaleKind = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// AdmitScale runs kubectl scale's request through the server's path for
// it: authorization of the write of <resource>/scale, the handler applying
// it to the current Scale (the parent seen through its registry's scale
// subresource, managedFields mapped by the upstream ScaleHandler), mutating
// admission of the Scale, the Scale's validation, the parent's registry
// strategy with the new replicas, and validating admission of the Scale.
// The kinds are the ones kube-apiserver serves a scale subresource for
// (scaleTargetFor); any other is answered 404 as the server does. The
// Result's Object is the Scale the server answers with; the parent it
// would store goes to Commit.
func (c *Chain) AdmitScale(ctx context.Context, req ScaleRequest) (*Result, error) {
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	resource, err := c.registry.ForKind(req.GroupVersionKind)
	if err != nil {
		return nil, err
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
	// kubectl scale patches the Scale; with a precondition it reads the
	// Scale and puts it back (k8s.io/kubectl/pkg/scale ScaleSimple).
	verb := "patch"
	if req.CurrentReplicas != nil {
		verb = "update"
	}
	userInfo := c.userInfo(Request{User: req.User, Groups: req.Groups})
	rec := &recorder{}
	ctx, warnings, err := requestScopeFor(ctx, rec, resource, verb, "scale", namespace, req.Name, userInfo)
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
	forbidden := func(s *metav1.Status) (*Result, error) {
		res.Allowed = false
		res.Code, res.Reason, res.Message, res.Details = s.Code, string(s.Reason), s.Message, s.Details
		return res, nil
	}
	// The first request kubectl sends: the GET with a precondition, the
	// patch without.
	firstVerb := verb
	if req.CurrentReplicas != nil {
		firstVerb = "get"
	}
	if s := c.authorize(ctx, resource, firstVerb, "scale", namespace, req.Name, userInfo); s != nil {
		return forbidden(s)
	}
	target, ok := scaleTargetFor(resource)
	if !ok {
		// No route: built-ins fall through to the server's not-found
		// handler, the CRD handler answers NotFound for the resource.
		if resource.CRD != nil {
			return fail(apierrors.NewNotFound(resource.GVR.GroupResource(), req.Name))
		}
		return fail(&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}})
	}
	existing, ok := c.state.Get(req.GroupVersionKind.GroupKind(), namespace, req.Name)
	if !ok {
		return fail(apierrors.NewNotFound(resource.GVR.GroupResource(), req.Name))
	}
	cd, strategy, err := c.handlerFor(resource)
	if err != nil {
		return nil, err
	}
	old, err := cd.decode(ctx, existing, metav1.FieldValidationIgnore)
	if err != nil {
		return nil, fmt.Errorf("decoding the stored object: %w", err)
	}
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return nil, err
	}
	if oldMeta.GetResourceVersion() == "" {
		// What a store would have (see checkResourceVersion).
		oldMeta.SetResourceVersion("1")
	}

	// The scale subresource's update (each registry's
	// scaleUpdatedObjectInfo).
	mf := managedfields.NewScaleHandler(oldMeta.GetManagedFields(), resource.GVR.GroupVersion(), target.mappings)
	oldScale, found, err := target.toScale(old)
	if err != nil {
		return fail(apierrors.NewBadRequest(err.Error()))
	}
	if req.CurrentReplicas != nil {
		if !found {
			// The CR ScaleREST's Get.
			return fail(apierrors.NewInternalError(fmt.Errorf("the spec replicas field %q does not exist", crSpecReplicasPath(resource))))
		}
		// kubectl's precondition, checked on the client against the Scale
		// it read: nothing is sent.
		if oldScale.Spec.Replicas != *req.CurrentReplicas {
			return preconditionFailed(res, *req.CurrentReplicas, oldScale.Spec.Replicas), nil
		}
		if s := c.authorize(ctx, resource, verb, "scale", namespace, req.Name, userInfo); s != nil {
			return forbidden(s)
		}
	}
	if !found {
		// The CR scale's signal that the replicas were not set before.
		oldScale.Spec.Replicas = math.MinInt32
	}
	if oldScale.ManagedFields, err = mf.ToSubresource(); err != nil {
		return nil, err
	}
	var newScale *autoscaling.Scale
	if req.CurrentReplicas != nil {
		// The PUT of the Scale kubectl read (without managedFields: the
		// GET answers none), the new replicas set.
		newScale = oldScale.DeepCopy()
		newScale.ManagedFields = nil
		newScale.Spec.Replicas = req.Replicas
	} else if newScale, err = c.patchScale(ctx, oldScale, req.Replicas); err != nil {
		// The patch handler: kubectl scale's merge patch of the Scale in
		// the request's version.
		return fail(err)
	}
	fm, err := c.scaleFieldManager(resource.GVR)
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
	// The patch handler passes the patch's options as UpdateOptions.
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
	if target.validator != nil {
		if errs := autoscalingvalidation.ValidateScaleUpdate(ctx, newScale, oldScale, legacyscheme.Scheme, target.validator); len(errs) > 0 {
			return fail(apierrors.NewInvalid(autoscaling.Kind("Scale"), req.Name, errs))
		}
	} else if newScale.Spec.Replicas == math.MinInt32 {
		return fail(apierrors.NewBadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", crSpecReplicasPath(resource))))
	}
	updated := old.DeepCopyObject()
	if err := target.setReplicas(updated, newScale.Spec.Replicas); err != nil {
		return nil, err
	}
	updatedMeta, err := meta.Accessor(updated)
	if err != nil {
		return nil, err
	}
	if newScale.ResourceVersion != "" {
		updatedMeta.SetResourceVersion(newScale.ResourceVersion)
	}
	entries, err := mf.ToParent(newScale.ManagedFields)
	if err != nil {
		return nil, err
	}
	updatedMeta.SetManagedFields(entries)

	// The parent's store: its strategy (for custom resources the schema
	// validation), validating admission seeing both sides as Scales.
	if err := rest.BeforeUpdate(strategy, ctx, updated, old); err != nil {
		return fail(err)
	}
	finalScale, _, err := target.toScale(updated)
	if err != nil {
		return fail(err)
	}
	finalOld, _, err := target.toScale(old)
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
	answer, _, err := target.toScale(updated)
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

// preconditionFailed is kubectl scale's answer when --current-replicas
// does not match: the error k8s.io/kubectl/pkg/scale returns, which
// kubectl prints; no request is made, so there is no HTTP status.
func preconditionFailed(res *Result, expected, actual int32) *Result {
	err := kubectlscale.PreconditionError{Precondition: "replicas",
		ExpectedValue: strconv.Itoa(int(expected)), ActualValue: strconv.Itoa(int(actual))}
	res.Allowed = false
	res.Reason = PreconditionFailedReason
	res.Message = err.Error()
	res.Notes = append(res.Notes, "kubectl checks --current-replicas itself against the Scale it reads and sends no write")
	return res
}

// PreconditionFailedReason is a Result's Reason when kubectl refused the
// write itself (kubectl scale --current-replicas not matching).
const PreconditionFailedReason = "KubectlPrecondition"

func crSpecReplicasPath(r *schema.Resource) string {
	if r.CRD == nil {
		return ""
	}
	for _, v := range r.CRD.Spec.Versions {
		if v.Name == r.GVR.Version && v.Subresources != nil && v.Subresources.Scale != nil {
			return v.Subresources.Scale.SpecReplicasPath
		}
	}
	return ""
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

// scaleFieldManager is the handlers' field manager for the Scale of a
// scale subresource. Its type information comes from the parent's group
// version: kube-apiserver's OpenAPI documents hold autoscaling/v1 Scale
// where a scale subresource answers it (the autoscaling/v1 document has
// none), as does a CRD's with a scale subresource. truce builds it with
// the internal scheme for custom resources too, whose CRD handler builds it
// with the CR's converters; the Scale's fields are the same.
func (c *Chain) scaleFieldManager(parent k8sschema.GroupVersionResource) (*managedfields.FieldManager, error) {
	c.fmMu.Lock()
	defer c.fmMu.Unlock()
	key := parent
	key.Resource += "/scale"
	if fm, ok := c.fieldManagers[key]; ok {
		return fm, nil
	}
	tc, err := c.registry.TypeConverter(parent.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("type information for %s: %w", parent.GroupVersion(), err)
	}
	s := legacyscheme.Scheme
	hub := k8sschema.GroupVersion{Group: "autoscaling", Version: runtime.APIVersionInternal}
	fm, err := managedfields.NewDefaultFieldManager(tc, runtime.UnsafeObjectConvertor(s), s, s, scaleKind, hub, "scale", nil)
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", key, err)
	}
	c.fieldManagers[key] = fm
	return fm, nil
}
