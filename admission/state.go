package admission

import (
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// State is the cluster a write is admitted against: namespaces, CRDs,
// admission configuration, params, RBAC and existing objects.
type State struct {
	objects map[objectKey]*unstructured.Unstructured
	order   []objectKey
	// system marks what the server and its controllers create themselves;
	// those objects are trusted, not validated.
	system map[objectKey]bool
	// paramKinds are the kinds policies name as their paramKind, by
	// apiVersion and kind; nil until asked for after a policy changed.
	paramKinds map[[2]string]bool
}

type objectKey struct {
	Group, Kind, Namespace, Name string
}

func keyOf(u *unstructured.Unstructured) objectKey {
	gvk := u.GroupVersionKind()
	return objectKey{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// NewState returns a state holding what every kube-apiserver 1.37 creates by
// itself (system namespaces, bootstrap RBAC, system priority classes) and
// what controllers that always run create (a "default" ServiceAccount per
// namespace), then the given objects.
func NewState(objs ...*unstructured.Unstructured) (*State, error) {
	sys, err := systemState()
	if err != nil {
		return nil, err
	}
	s := &State{objects: make(map[objectKey]*unstructured.Unstructured, len(sys.objects)+len(objs)), system: make(map[objectKey]bool, len(sys.system))}
	s.order = append(make([]objectKey, 0, len(sys.order)+len(objs)), sys.order...)
	for k, o := range sys.objects {
		s.objects[k] = o.DeepCopy()
	}
	for k := range sys.system {
		s.system[k] = true
	}
	for _, o := range objs {
		if err := s.Put(o); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// systemState is what every state starts with, in its stored form; built
// once per process (converting and defaulting the bootstrap policy was a
// third of building a state) and copied into each state.
var systemState = sync.OnceValues(func() (*State, error) {
	s := &State{objects: map[objectKey]*unstructured.Unstructured{}, system: map[objectKey]bool{}}
	var system []*unstructured.Unstructured
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		system = append(system, namespaceObject(ns))
	}
	for _, o := range append(system, bootstrapObjects()...) {
		if err := s.Put(o); err != nil {
			return nil, err
		}
	}
	for k := range s.objects {
		s.system[k] = true
	}
	return s, nil
})

// Put adds or replaces an object. A Namespace also gets its "default"
// ServiceAccount, as the serviceaccount controller would create it.
func (s *State) Put(o *unstructured.Unstructured) error {
	if o.GetKind() == "" || o.GetName() == "" {
		return fmt.Errorf("object without kind or name cannot be part of the cluster state")
	}
	o, err := storedForm(o)
	if err != nil {
		return err
	}
	k := keyOf(o)
	if _, ok := s.objects[k]; !ok {
		s.order = append(s.order, k)
	}
	s.objects[k] = o
	s.policyChanged(k)
	if k.Group == "" && k.Kind == "Namespace" {
		sa := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": map[string]any{"name": "default", "namespace": o.GetName()},
		}}
		if _, ok := s.objects[keyOf(sa)]; !ok {
			s.order = append(s.order, keyOf(sa))
			s.objects[keyOf(sa)] = sa
			s.system[keyOf(sa)] = true
		}
	}
	return nil
}

// putSystem adds or replaces an object the cluster's own components
// create: trusted, not validated.
func (s *State) putSystem(o *unstructured.Unstructured) error {
	if err := s.Put(o); err != nil {
		return err
	}
	s.system[keyOf(o)] = true
	return nil
}

// storedForm applies API defaulting to built-in objects (and
// CustomResourceDefinitions), as the server does before storing them: the
// admission plugins read policies, bindings and webhook configurations with
// their defaults filled in.
func storedForm(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := o.GroupVersionKind()
	s := schemeFor(gvk.Group)
	if !s.Recognizes(gvk) {
		return o, nil
	}
	typed, err := s.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	s.Default(typed)
	return versionedToUnstructured(typed, gvk)
}

// ConvertTo returns a copy of a stored object in the version of gvk:
// built-ins through the scheme's conversions, custom resources by changing
// apiVersion (the "None" conversion strategy). An empty version keeps the
// stored one.
func ConvertTo(o *unstructured.Unstructured, gvk k8sschema.GroupVersionKind) (*unstructured.Unstructured, error) {
	have := o.GroupVersionKind()
	if have.Version == gvk.Version || gvk.Version == "" {
		return o.DeepCopy(), nil
	}
	if !builtinKind(have) || !builtinKind(gvk) {
		out := o.DeepCopy()
		out.SetAPIVersion(gvk.GroupVersion().String())
		return out, nil
	}
	typed, err := schemeFor(have.Group).New(have)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", have.Kind, o.GetName(), err)
	}
	out, err := codecFor(gvk.Group).encode(typed, gvk)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", have.Kind, o.GetName(), err)
	}
	return out, nil
}

// replace swaps an object for its stored form, keeping its place.
func (s *State) replace(old, stored *unstructured.Unstructured) {
	k := keyOf(old)
	if _, ok := s.objects[k]; ok && keyOf(stored) == k {
		s.objects[k] = stored
		s.policyChanged(k)
	}
}

// Get returns the existing object with the identity of o, if any.
func (s *State) Get(gk k8sschema.GroupKind, namespace, name string) (*unstructured.Unstructured, bool) {
	o, ok := s.objects[objectKey{Group: gk.Group, Kind: gk.Kind, Namespace: namespace, Name: name}]
	return o, ok
}

// Objects returns all objects in insertion order.
func (s *State) Objects() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, s.objects[k])
	}
	return out
}

// Each calls fn with the objects of kind gk in namespace (in all when
// empty), in insertion order, until fn returns false. fn must not change
// the state or the objects.
func (s *State) Each(gk k8sschema.GroupKind, namespace string, fn func(*unstructured.Unstructured) bool) {
	for _, k := range s.order {
		// By key: no object's apiVersion is parsed.
		if k.Group != gk.Group || k.Kind != gk.Kind || (namespace != "" && k.Namespace != namespace) {
			continue
		}
		if !fn(s.objects[k]) {
			return
		}
	}
}

// CRDs decodes the CustomResourceDefinitions of the state.
func (s *State) CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, o := range s.Objects() {
		if o.GroupVersionKind().GroupKind() != (k8sschema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			return nil, fmt.Errorf("decoding CustomResourceDefinition %s: %w", o.GetName(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// configurationKinds are kinds whose objects change how later writes are
// admitted; writing one invalidates a compiled chain.
var configurationKinds = sets.New(
	"Namespace", "CustomResourceDefinition",
	"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
	"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
	"LimitRange", "ResourceQuota", "ServiceAccount", "PriorityClass",
	"RuntimeClass", "IngressClass", "StorageClass",
)

func namespaceObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{
			"name":   name,
			"labels": map[string]any{"kubernetes.io/metadata.name": name},
		},
	}}
}

// bootstrapObjects are the RBAC roles and priority classes the server
// creates at start (its post-start hooks), from the upstream definitions.
func bootstrapObjects() []*unstructured.Unstructured {
	var typed []runtime.Object
	for i := range bootstrappolicy.ClusterRoles() {
		typed = append(typed, &bootstrappolicy.ClusterRoles()[i])
	}
	for i := range bootstrappolicy.ClusterRoleBindings() {
		typed = append(typed, &bootstrappolicy.ClusterRoleBindings()[i])
	}
	var out []*unstructured.Unstructured
	for _, t := range typed {
		gvks, _, err := scheme.Scheme.ObjectKinds(t)
		if err != nil || len(gvks) == 0 {
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
		if err != nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvks[0])
		out = append(out, u)
	}
	for _, pc := range []struct {
		name  string
		value int64
	}{{"system-node-critical", 2000001000}, {"system-cluster-critical", 2000000000}} {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
			"metadata":    map[string]any{"name": pc.name},
			"value":       pc.value,
			"description": "Used for system critical pods that must not be moved from their current node.",
		}})
	}
	return out
}

// Delete removes an object and reports whether it existed. Deleting a
// Namespace removes what it contains, as the namespace controller would
// once its finalizer runs.
func (s *State) Delete(gk k8sschema.GroupKind, namespace, name string) bool {
	k := objectKey{Group: gk.Group, Kind: gk.Kind, Namespace: namespace, Name: name}
	if _, ok := s.objects[k]; !ok {
		return false
	}
	gone := func(o objectKey) bool {
		return o == k || (k.Group == "" && k.Kind == "Namespace" && o.Namespace == k.Name)
	}
	order := s.order[:0]
	for _, o := range s.order {
		if gone(o) {
			s.policyChanged(o)
			delete(s.objects, o)
			delete(s.system, o)
			continue
		}
		order = append(order, o)
	}
	s.order = order
	return true
}

// paramKindOf is a policy's spec.paramKind as apiVersion and kind.
func paramKindOf(policy *unstructured.Unstructured) [2]string {
	apiVersion, _, _ := unstructured.NestedString(policy.Object, "spec", "paramKind", "apiVersion")
	kind, _, _ := unstructured.NestedString(policy.Object, "spec", "paramKind", "kind")
	return [2]string{apiVersion, kind}
}

func isPolicyKind(kind string) bool {
	return kind == "MutatingAdmissionPolicy" || kind == "ValidatingAdmissionPolicy"
}

// policyChanged forgets the param kinds when the object at k is a policy.
func (s *State) policyChanged(k objectKey) {
	if isPolicyKind(k.Kind) {
		s.paramKinds = nil
	}
}

// isParamKind reports whether a policy of the state names gvk as its
// paramKind: writing such an object changes what admission reads.
func (s *State) isParamKind(gvk k8sschema.GroupVersionKind) bool {
	if s.paramKinds == nil {
		s.paramKinds = map[[2]string]bool{}
		for _, k := range s.order {
			if !isPolicyKind(k.Kind) {
				continue
			}
			s.paramKinds[paramKindOf(s.objects[k])] = true
		}
	}
	return s.paramKinds[[2]string{gvk.GroupVersion().String(), gvk.Kind}]
}
