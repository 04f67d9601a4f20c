package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// objectRef identifies an object the harness created or changed.
type objectRef struct {
	gvr       schema.GroupVersionResource
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func (r objectRef) String() string {
	return fmt.Sprintf("%s %s/%s", r.gvk, r.namespace, r.name)
}

type originalObject struct {
	ref objectRef
	obj *unstructured.Unstructured
}

var (
	gvrNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrCRDs       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

	// admissionConfigGVRs are swept by Cleanup, bindings before their
	// policies so that no binding is ever left pointing at nothing.
	admissionConfigGVRs = []schema.GroupVersionResource{
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	}
)

// SystemNamespaces are never deleted by Cleanup: kube-apiserver creates
// "default", "kube-system", "kube-public" and "kube-node-lease" itself (and
// NamespaceLifecycle refuses to delete the first three), and the sentinel's
// namespace belongs to the harness.
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease", SentinelNamespace}

func isSystemNamespace(name string) bool {
	for _, n := range SystemNamespaces {
		if n == name {
			return true
		}
	}
	return false
}

// applyPhase orders the objects given to Apply. Namespaces and CRDs come
// first because other objects live in them. Admission configuration
// (policies, bindings, webhooks) comes last: a case's cluster.yaml describes
// objects as they are stored, and creating the "existing" objects before the
// policies keeps the case's own policies from mutating or rejecting them.
func applyPhase(gvk schema.GroupVersionKind) int {
	switch {
	case gvk.Group == "" && gvk.Kind == "Namespace":
		return 0
	case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return 1
	case gvk.Group == "admissionregistration.k8s.io":
		return 3
	default:
		return 2
	}
}

// Apply creates objs, or updates them where they already exist (e.g. labels
// on namespace "default"), in dependency order (see applyPhase; the order
// of the arguments is kept within a phase). It waits until every
// CustomResourceDefinition among them is Established and its kinds are in
// discovery before creating anything else. Objects are sent with strict
// field validation so that a typo in a case fails loudly instead of being
// dropped. Namespaced objects without a namespace go to "default".
//
// Apply does not wait for the admission chain to see the new objects; call
// WaitForAdmissionSync for that. Everything Apply created or changed is
// undone by Cleanup.
func (s *Server) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	ordered := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(ordered, func(i, j int) bool {
		return applyPhase(ordered[i].GroupVersionKind()) < applyPhase(ordered[j].GroupVersionKind())
	})
	var crds []string
	for i, obj := range ordered {
		gvk := obj.GroupVersionKind()
		if applyPhase(gvk) > 1 && len(crds) > 0 {
			if err := s.waitForCRDs(ctx, crds); err != nil {
				return err
			}
			crds = nil
		}
		if _, err := s.upsert(ctx, obj, true); err != nil {
			return fmt.Errorf("apply object %d (%s %s): %w", i+1, gvk.Kind, obj.GetName(), err)
		}
		if applyPhase(gvk) == 1 {
			crds = append(crds, obj.GetName())
		}
	}
	if len(crds) > 0 {
		return s.waitForCRDs(ctx, crds)
	}
	return nil
}

// The field managers of Apply's writes: what kubectl create -f and kubectl
// replace -f send. truce admit takes an object of -c without managedFields
// to have been created by kubectl create, and sends the same by default.
const (
	CreateFieldManager  = "kubectl-create"
	ReplaceFieldManager = "kubectl-replace"
)

// upsert creates obj or, if it exists, updates it to obj (with the live
// resourceVersion). With track set, it records what it did for Cleanup.
// An object that carries managedFields is stored with exactly those.
func (s *Server) upsert(ctx context.Context, obj *unstructured.Unstructured, track bool) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	ri, ref, err := s.resourceInterface(ctx, s.dynamic, obj)
	if err != nil {
		return nil, err
	}
	out, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, FieldManager: CreateFieldManager})
	if err == nil {
		if track {
			s.mu.Lock()
			s.created = append(s.created, ref)
			s.mu.Unlock()
		}
		if given := obj.GetManagedFields(); len(given) > 0 {
			// The create added its own entry to the given ones. The server
			// takes the managedFields of a write as the stored entries, and
			// a PUT that changes nothing else adds none.
			out.SetManagedFields(given)
			return ri.Update(ctx, out, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict, FieldManager: ReplaceFieldManager})
		}
		return out, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	live, err := ri.Get(ctx, ref.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if track {
		s.mu.Lock()
		if _, ok := s.originals[ref.String()]; !ok && !s.createdLocked(ref) {
			s.originals[ref.String()] = &originalObject{ref: ref, obj: live.DeepCopy()}
		}
		s.mu.Unlock()
	}
	obj.SetResourceVersion(live.GetResourceVersion())
	return ri.Update(ctx, obj, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict, FieldManager: ReplaceFieldManager})
}

func (s *Server) createdLocked(ref objectRef) bool {
	for _, c := range s.created {
		if c == ref {
			return true
		}
	}
	return false
}

// resourceInterface finds the resource client for obj, defaulting the
// namespace of namespaced objects to "default" (as kubectl does).
func (s *Server) resourceInterface(ctx context.Context, client dynamic.Interface, obj *unstructured.Unstructured) (dynamic.ResourceInterface, objectRef, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, objectRef{}, fmt.Errorf("object %q has no apiVersion/kind", obj.GetName())
	}
	mapping, err := s.ResourceFor(ctx, gvk)
	if err != nil {
		return nil, objectRef{}, err
	}
	ref := objectRef{gvr: mapping.Resource, gvk: gvk, name: obj.GetName()}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		ref.namespace = obj.GetNamespace()
		return client.Resource(mapping.Resource).Namespace(ref.namespace), ref, nil
	}
	return client.Resource(mapping.Resource), ref, nil
}

// waitForCRDs waits until the named CRDs are Established (the server serves
// their resources) and their kinds resolve through discovery.
func (s *Server) waitForCRDs(ctx context.Context, names []string) error {
	for _, name := range names {
		var crd *unstructured.Unstructured
		err := poll(ctx, discoveryTimeout, func(ctx context.Context) (bool, error) {
			var err error
			crd, err = s.dynamic.Resource(gvrCRDs).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return crdCondition(crd, "Established") && crdCondition(crd, "NamesAccepted"), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if served, _ := vm["served"].(bool); !served {
				continue
			}
			version, _ := vm["name"].(string)
			if _, err := s.ResourceFor(ctx, schema.GroupVersionKind{Group: group, Version: version, Kind: kind}); err != nil {
				return err
			}
		}
	}
	return nil
}

func crdCondition(crd *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] == condType && cm["status"] == "True" {
			return true
		}
	}
	return false
}

// Cleanup returns the server to its pristine state and waits until the
// admission chain no longer sees anything that was there (WaitForAdmissionSync):
//
//   - all ValidatingAdmissionPolicies/Bindings, MutatingAdmissionPolicies/
//     Bindings and webhook configurations except the harness's sentinels;
//   - every object Apply created, and the objects Apply overwrote restored;
//   - every namespace but SystemNamespaces, with its contents. Nothing
//     finalizes namespaces here (the namespace controller belongs to
//     kube-controller-manager), so Cleanup does that controller's job;
//   - every CustomResourceDefinition except the sentinel's.
func (s *Server) Cleanup(ctx context.Context) error {
	var errs []error
	notSentinel := metav1.ListOptions{LabelSelector: "!" + SentinelLabel}
	for _, gvr := range admissionConfigGVRs {
		if err := s.dynamic.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, notSentinel); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", gvr.Resource, err))
		}
	}

	s.mu.Lock()
	created := s.created
	originals := s.originals
	s.created = nil
	s.originals = map[string]*originalObject{}
	s.mu.Unlock()

	for i := len(created) - 1; i >= 0; i-- {
		ref := created[i]
		if ref.gvr == gvrNamespaces || ref.gvr == gvrCRDs || (ref.namespace != "" && !isSystemNamespace(ref.namespace)) {
			continue // swept below, with their contents
		}
		if err := s.forceDelete(ctx, ref); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range originals {
		if err := s.restore(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}

	nss, err := s.dynamic.Resource(gvrNamespaces).List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, ns := range nss.Items {
			if !isSystemNamespace(ns.GetName()) {
				if err := s.deleteNamespace(ctx, ns.GetName()); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}

	crds, err := s.dynamic.Resource(gvrCRDs).List(ctx, notSentinel)
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, crd := range crds.Items {
			ref := objectRef{gvr: gvrCRDs, name: crd.GetName()}
			// The CRD finalizer (which runs inside kube-apiserver)
			// deletes the custom resources and then the CRD.
			if err := s.deleteAndWait(ctx, ref, false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Forget kinds whose CRDs are gone.
	s.mapper.Reset()

	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return s.WaitForAdmissionSync(ctx)
}

// restore puts an object Apply overwrote back the way it was.
func (s *Server) restore(ctx context.Context, o *originalObject) error {
	ri := s.dynamic.Resource(o.ref.gvr).Namespace(o.ref.namespace)
	live, err := ri.Get(ctx, o.ref.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = ri.Create(ctx, stripForCreate(o.obj), metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	obj := o.obj.DeepCopy()
	obj.SetResourceVersion(live.GetResourceVersion())
	// Empty managedFields in an update mean "leave them alone".
	obj.SetManagedFields(nil)
	if _, err := ri.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("restore %s: %w", o.ref, err)
	}
	return nil
}

func stripForCreate(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetManagedFields(nil)
	obj.SetCreationTimestamp(metav1.Time{})
	return obj
}

// forceDelete deletes an object without waiting for anyone: grace period 0
// (there is no kubelet to confirm a Pod's termination) and finalizers
// stripped (there are no controllers to remove them).
func (s *Server) forceDelete(ctx context.Context, ref objectRef) error {
	return s.deleteAndWait(ctx, ref, true)
}

func (s *Server) deleteAndWait(ctx context.Context, ref objectRef, stripFinalizers bool) error {
	ri := s.dynamic.Resource(ref.gvr).Namespace(ref.namespace)
	zero := int64(0)
	background := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, ref.name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &background})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	err = poll(ctx, SyncTimeout, func(ctx context.Context) (bool, error) {
		live, err := ri.Get(ctx, ref.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if stripFinalizers && len(live.GetFinalizers()) > 0 {
			if err := s.stripFinalizers(ctx, ri, ref.name); err != nil {
				return false, err
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to go away: %w", ref, err)
	}
	return nil
}

func (s *Server) stripFinalizers(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	_, err := ri.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteNamespace deletes a namespace the way the namespace controller
// would: mark it Terminating (NamespaceLifecycle then refuses new objects
// in it), delete everything in it, then finalize it.
func (s *Server) deleteNamespace(ctx context.Context, name string) error {
	nsClient := s.client.CoreV1().Namespaces()
	err := nsClient.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}

	resources, err := s.namespacedResources()
	if err != nil {
		return err
	}
	zero := int64(0)
	// Background propagation, as the namespace controller deletes: the
	// default for v1 ReplicationControllers is to orphan, which adds the
	// orphan finalizer, and with no garbage collector here the controller
	// would outlive its namespace and haunt the next case that reuses it.
	background := metav1.DeletePropagationBackground
	for _, gvr := range resources {
		ri := s.dynamic.Resource(gvr).Namespace(name)
		list, err := ri.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s in %s: %w", gvr.Resource, name, err)
		}
		for _, item := range list.Items {
			if len(item.GetFinalizers()) > 0 {
				if err := s.stripFinalizers(ctx, ri, item.GetName()); err != nil {
					return err
				}
			}
			err := ri.Delete(ctx, item.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &background})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, name, item.GetName(), err)
			}
		}
	}

	return poll(ctx, SyncTimeout, func(ctx context.Context) (bool, error) {
		ns, err := nsClient.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if len(ns.Finalizers) > 0 {
			ri := s.dynamic.Resource(gvrNamespaces)
			return false, s.stripFinalizers(ctx, ri, name)
		}
		if len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			if _, err := nsClient.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return false, fmt.Errorf("finalize namespace %s: %w", name, err)
			}
			return false, nil
		}
		// Finalized: like the namespace controller, delete once more to
		// have the registry remove it for good.
		if err := nsClient.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete finalized namespace %s: %w", name, err)
		}
		return false, nil
	})
}

// namespacedResources lists the namespaced resources that can be listed and
// deleted, from fresh discovery (cases add CRDs).
func (s *Server) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := s.client.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discover namespaced resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out, nil
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
