package admission

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"

	"github.com/truce-dev/truce/admission/builtin"
	"github.com/truce-dev/truce/schema"
)

// configStrategies are the registry strategies of admission configuration.
// The policy strategies need an authorizer and a resource resolver (they
// compile CEL against the types of matched resources and check that the
// writer may read a paramKind), so they are built per chain.
func configStrategies(reg *schema.Registry, authz authorizer.Authorizer, state *State) map[k8sschema.GroupResource]builtin.Strategy {
	resolve := resourceResolver{reg}
	policies := policyGetter{state}
	gr := func(r string) k8sschema.GroupResource {
		return k8sschema.GroupResource{Group: "admissionregistration.k8s.io", Resource: r}
	}
	return map[k8sschema.GroupResource]builtin.Strategy{
		gr("mutatingwebhookconfigurations"):     mutatingwebhookconfiguration.Strategy,
		gr("validatingwebhookconfigurations"):   validatingwebhookconfiguration.Strategy,
		gr("validatingadmissionpolicies"):       validatingadmissionpolicy.NewStrategy(authz, resolve),
		gr("validatingadmissionpolicybindings"): validatingadmissionpolicybinding.NewStrategy(authz, policies, resolve),
		gr("mutatingadmissionpolicies"):         mutatingadmissionpolicy.NewStrategy(authz, resolve),
		gr("mutatingadmissionpolicybindings"):   mutatingadmissionpolicybinding.NewStrategy(authz, policies, resolve),
	}
}

// writerAuthorizer is the authorizer the policy strategies ask whether the
// writer may read a paramKind: the chain's. The state is stored before the
// chain's authorizer exists (its RBAC comes from the stored state), by an
// admin: until then only system:masters is known, the authorizer's first
// member.
type writerAuthorizer struct{ c *Chain }

var stateAuthorizer = authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)

func (a writerAuthorizer) current() authorizer.Authorizer {
	if a.c.authz == nil {
		return stateAuthorizer
	}
	return a.c.authz
}

func (a writerAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	return a.current().Authorize(ctx, attrs)
}

func (a writerAuthorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return a.current().ConditionsAwareAuthorize(ctx, attrs)
}

func (a writerAuthorizer) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return a.current().EvaluateConditions(ctx, d, data)
}

type resourceResolver struct{ reg *schema.Registry }

func (r resourceResolver) Resolve(gvk k8sschema.GroupVersionKind) (k8sschema.GroupVersionResource, error) {
	res, err := r.reg.ForKind(gvk)
	if err != nil {
		return k8sschema.GroupVersionResource{}, err
	}
	return res.GVR, nil
}

// policyGetter reads policies from the state for the binding strategies.
type policyGetter struct{ state *State }

func (p policyGetter) GetValidatingAdmissionPolicy(ctx context.Context, name string) (*admissionregistration.ValidatingAdmissionPolicy, error) {
	return getPolicy[*admissionregistration.ValidatingAdmissionPolicy](ctx, p.state, "ValidatingAdmissionPolicy", "validatingadmissionpolicies", name)
}

func (p policyGetter) GetMutatingAdmissionPolicy(ctx context.Context, name string) (*admissionregistration.MutatingAdmissionPolicy, error) {
	return getPolicy[*admissionregistration.MutatingAdmissionPolicy](ctx, p.state, "MutatingAdmissionPolicy", "mutatingadmissionpolicies", name)
}

// getPolicy decodes a policy of the state into its internal type, as the
// server's storage would return it to the binding strategies.
func getPolicy[T runtime.Object](ctx context.Context, state *State, kind, resource, name string) (T, error) {
	var zero T
	gk := k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: kind}
	u, ok := state.Get(gk, "", name)
	if !ok {
		return zero, apierrors.NewNotFound(k8sschema.GroupResource{Group: gk.Group, Resource: resource}, name)
	}
	obj, err := builtinCodec.decode(ctx, u, metav1.FieldValidationIgnore)
	if err != nil {
		return zero, err
	}
	typed, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s %s decoded as %T", kind, name, obj)
	}
	return typed, nil
}

// InvalidObjectError reports an object of the cluster state that the server
// would have refused to store, so the cluster cannot contain it.
type InvalidObjectError struct {
	Object *unstructured.Unstructured
	Err    error
}

func (e *InvalidObjectError) Error() string {
	return fmt.Sprintf("%s %q cannot exist in a cluster: %v", e.Object.GetKind(), e.Object.GetName(), e.Err)
}

func (e *InvalidObjectError) Unwrap() error { return e.Err }

// storeState puts every object of the state into the form the server
// would have stored when it was created: decoded with defaults, prepared by
// its registry strategy (a Namespace gets its "kubernetes" finalizer, a Pod
// its phase and QoS class) and validated. An object the server would have
// refused cannot be part of a cluster: that is an InvalidObjectError.
// Objects of kinds without a modelled strategy are kept as they are.
func (c *Chain) storeState(ctx context.Context) error {
	for _, o := range c.state.Objects() {
		if err := c.storeObject(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// storeObject replaces o in the state by its stored form.
func (c *Chain) storeObject(ctx context.Context, o *unstructured.Unstructured) error {
	system := c.state.system[keyOf(o)]
	resource, err := c.registry.ForKind(o.GroupVersionKind())
	if err != nil {
		return &InvalidObjectError{Object: o, Err: err}
	}
	manager := ""
	if !system && len(o.GetManagedFields()) == 0 {
		manager = c.opts.StateFieldManager
	}
	if !c.modelled(resource) && manager == "" {
		return nil
	}
	stored, err := c.created(ctx, resource, o, manager)
	if err != nil {
		if system {
			return nil
		}
		return &InvalidObjectError{Object: o, Err: err}
	}
	keepObserved(stored, o)
	c.state.replace(o, stored)
	return nil
}

// keepObserved keeps what a snapshot of a live object says that a create
// cannot know: its identity, versions, age and the status controllers wrote.
func keepObserved(stored, snapshot *unstructured.Unstructured) {
	stored.SetResourceVersion(snapshot.GetResourceVersion())
	if uid := snapshot.GetUID(); uid != "" {
		stored.SetUID(uid)
	}
	if ts := snapshot.GetCreationTimestamp(); !ts.IsZero() {
		stored.SetCreationTimestamp(ts)
	}
	if g := snapshot.GetGeneration(); g != 0 {
		stored.SetGeneration(g)
	}
	if status, ok := snapshot.Object["status"].(map[string]any); ok && len(status) > 0 {
		stored.Object["status"] = runtime.DeepCopyJSONValue(status)
	}
}

// admitState gives the existing built-in objects of the state what the
// built-in mutating admission plugins add on create.
func (c *Chain) admitState(ctx context.Context) {
	ctx = withBuiltinOnly(ctx)
	for _, o := range c.state.Objects() {
		if c.state.system[keyOf(o)] {
			continue
		}
		resource, err := c.registry.ForKind(o.GroupVersionKind())
		if err != nil || resource.CRD != nil || !c.modelled(resource) {
			continue
		}
		codec, _, err := c.handlerFor(resource)
		if err != nil {
			continue
		}
		obj, err := codec.decode(ctx, o, metav1.FieldValidationIgnore)
		if err != nil {
			continue
		}
		ns := objectNamespace(resource, o.GetNamespace())
		admin := c.userInfo(Request{})
		actx := requestContext(ctx, resource, "create", ns, o.GetName(), admin)
		attrs := k8sadmission.NewAttributesRecord(obj, nil, resource.GVK(), ns, o.GetName(), resource.GVR, "",
			k8sadmission.Create, &metav1.CreateOptions{}, true, admin)
		if err := c.plugins.(k8sadmission.MutationInterface).Admit(actx, attrs, c.objects); err != nil {
			continue
		}
		stored, err := codec.encode(attrs.GetObject(), resource.GVK())
		if err != nil {
			continue
		}
		keepObserved(stored, o)
		c.state.replace(o, stored)
	}
}

// created runs the registry part of a create (no admission) on o. With a
// manager, the create is recorded in managedFields as that manager's, the
// way the create handler records it: the decoded object's fields, before
// the strategy prepares it. Objects of kinds without a modelled strategy
// only get their entries.
func (c *Chain) created(ctx context.Context, resource *schema.Resource, o *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	codec, strategy, err := c.handlerFor(resource)
	if err != nil {
		return nil, err
	}
	obj, err := codec.decode(ctx, o, metav1.FieldValidationIgnore)
	if err != nil {
		return nil, err
	}
	ns := objectNamespace(resource, o.GetNamespace())
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	accessor.SetNamespace(ns)
	if manager != "" {
		if obj, err = c.recordFields(resource, strategy, obj, nil, manager); err != nil {
			return nil, err
		}
		if accessor, err = meta.Accessor(obj); err != nil {
			return nil, err
		}
	}
	if !c.modelled(resource) {
		return codec.encode(obj, resource.GVK())
	}
	rest.FillObjectMetaSystemFields(accessor)
	vctx := requestContext(ctx, resource, "create", ns, o.GetName(), c.userInfo(Request{}))
	if c.isServices(resource) {
		opts := &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		if _, err := c.services.BeginCreate(vctx, obj, opts); err != nil {
			return nil, err
		}
	}
	if err := rest.BeforeCreate(strategy, vctx, obj); err != nil {
		return nil, err
	}
	return codec.encode(obj, resource.GVK())
}
