package admission

import (
	"context"
	"fmt"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/truce-dev/truce/schema"
)

// objectInterfaces is the admission.ObjectInterfaces of a request scope:
// the legacy scheme for built-ins, the apiextensions-apiserver's scheme for
// CustomResourceDefinitions, unstructured handling for custom resources, and
// the registry's resource equivalence.
type objectInterfaces struct {
	registry *schema.Registry
	// structural returns the structural schema of a custom resource's
	// version; nil for built-ins and schemas without one.
	structural func(k8sschema.GroupVersionKind) *structuralschema.Structural
}

func (o *objectInterfaces) GetObjectCreater() runtime.ObjectCreater { return creater{o.registry} }
func (o *objectInterfaces) GetObjectTyper() runtime.ObjectTyper     { return typer{} }
func (o *objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter {
	return defaulter{o.structural}
}
func (o *objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor{} }
func (o *objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.registry.EquivalentResourceMapper()
}

type creater struct{ registry *schema.Registry }

func (c creater) New(gvk k8sschema.GroupVersionKind) (runtime.Object, error) {
	if builtinKind(gvk) {
		return schemeFor(gvk.Group).New(gvk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

type typer struct{}

func (typer) ObjectKinds(obj runtime.Object) ([]k8sschema.GroupVersionKind, bool, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		gvk := u.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			return nil, false, fmt.Errorf("unstructured object has no kind")
		}
		return []k8sschema.GroupVersionKind{gvk}, false, nil
	}
	return schemeOf(obj).ObjectKinds(obj)
}

func (typer) Recognizes(gvk k8sschema.GroupVersionKind) bool { return true }

// defaulter applies the scheme's defaults to built-ins and a custom
// resource's structural defaults to it, as the CRD handler's
// unstructuredDefaulter does: the webhook and policy dispatchers default
// the object again after each patch, so a defaulted field a patch removed
// is back.
type defaulter struct {
	structural func(k8sschema.GroupVersionKind) *structuralschema.Structural
}

func (d defaulter) Default(obj runtime.Object) {
	if u, ok := obj.(runtime.Unstructured); ok {
		if d.structural != nil {
			structuraldefaulting.Default(u.UnstructuredContent(), d.structural(obj.GetObjectKind().GroupVersionKind()))
		}
		return
	}
	schemeOf(obj).Default(obj)
}

// convertor converts built-ins and CustomResourceDefinitions with their
// scheme and custom resources the way the "None" conversion strategy does:
// only apiVersion changes.
type convertor struct{}

func (convertor) Convert(in, out, context any) error {
	u, inU := in.(*unstructured.Unstructured)
	o, outU := out.(*unstructured.Unstructured)
	if inU && outU && !builtinKind(u.GroupVersionKind()) {
		apiVersion := o.GetAPIVersion()
		o.Object = runtime.DeepCopyJSON(u.Object)
		if apiVersion != "" {
			o.SetAPIVersion(apiVersion)
		}
		return nil
	}
	return schemeOf(in).Convert(in, out, context)
}

func (convertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	// Unstructured built-ins (what a MutatingAdmissionPolicy patch returns)
	// are converted to their typed form by the scheme, which also defaults
	// them, exactly as the server's convertor does.
	if u, ok := in.(*unstructured.Unstructured); ok && !builtinKind(u.GroupVersionKind()) {
		gvk, ok := gv.KindForGroupVersionKinds([]k8sschema.GroupVersionKind{u.GroupVersionKind()})
		if !ok {
			return nil, fmt.Errorf("%v is unstructured and cannot be converted to %v", u.GroupVersionKind(), gv)
		}
		out := u.DeepCopy()
		out.SetGroupVersionKind(gvk)
		return out, nil
	}
	return schemeOf(in).ConvertToVersion(in, gv)
}

func (convertor) ConvertFieldLabel(gvk k8sschema.GroupVersionKind, label, value string) (string, string, error) {
	return schemeFor(gvk.Group).ConvertFieldLabel(gvk, label, value)
}

// metadataOnlyStrategy validates ObjectMeta only; it stands in for
// registries truce does not model yet.
type metadataOnlyStrategy struct{ namespaced bool }

func (s metadataOnlyStrategy) ObjectKinds(obj runtime.Object) ([]k8sschema.GroupVersionKind, bool, error) {
	return typer{}.ObjectKinds(obj)
}
func (s metadataOnlyStrategy) Recognizes(gvk k8sschema.GroupVersionKind) bool { return true }
func (s metadataOnlyStrategy) GenerateName(base string) string {
	return names.SimpleNameGenerator.GenerateName(base)
}
func (s metadataOnlyStrategy) NamespaceScoped() bool                                    { return s.namespaced }
func (s metadataOnlyStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {}
func (s metadataOnlyStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return nil
}
func (s metadataOnlyStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return nil
}
func (s metadataOnlyStrategy) Canonicalize(obj runtime.Object)                               {}
func (s metadataOnlyStrategy) AllowCreateOnUpdate(context.Context) bool                      { return false }
func (s metadataOnlyStrategy) AllowUnconditionalUpdate(context.Context) bool                 { return true }
func (s metadataOnlyStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}
func (s metadataOnlyStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return nil
}
func (s metadataOnlyStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}
