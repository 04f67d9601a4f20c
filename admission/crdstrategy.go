package admission

import (
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"github.com/truce-dev/truce/admission/builtin"
	"github.com/truce-dev/truce/schema"
)

// kube-apiserver does not serve apiextensions.k8s.io itself: it delegates
// the group to the apiextensions-apiserver, which installs
// CustomResourceDefinitions with its own scheme and codecs
// (k8s.io/apiextensions-apiserver/pkg/apiserver: internal and v1 types with
// their defaulting and conversions) and its own registry strategy
// (pkg/registry/customresourcedefinition). The legacy scheme does not know
// the group.

// crdResource is the resource of CustomResourceDefinitions.
var crdResource = apiextensions.Resource("customresourcedefinitions")

// crdStrategy is the store's create and update strategy for
// CustomResourceDefinitions, built like customresourcedefinition.NewREST
// builds it: PrepareForCreate/Update (status, generation, storedVersions),
// validation and warnings, and status as the reset field of the main
// resource.
var crdStrategy builtin.Strategy = customresourcedefinition.NewStrategy(apiextensionsapiserver.Scheme)

// isCRDs reports whether r is the CustomResourceDefinition resource itself.
func isCRDs(r *schema.Resource) bool {
	return r.CRD == nil && r.GVR.GroupResource() == crdResource
}

// schemeFor returns the scheme that serves a built-in group: the
// apiextensions-apiserver's for apiextensions.k8s.io, the legacy scheme for
// every other group.
func schemeFor(group string) *runtime.Scheme {
	if group == apiextensions.GroupName {
		return apiextensionsapiserver.Scheme
	}
	return legacyscheme.Scheme
}

// codecFor returns how the server decodes and encodes objects of a built-in
// group.
func codecFor(group string) schemeCodec {
	if group == apiextensions.GroupName {
		return schemeCodec{scheme: apiextensionsapiserver.Scheme, codecs: apiextensionsapiserver.Codecs}
	}
	return builtinCodec
}

// schemeOf returns the scheme of an object: by its kind's group when it is
// unstructured, by its Go type when it is typed.
func schemeOf(obj any) *runtime.Scheme {
	switch o := obj.(type) {
	case runtime.Unstructured:
		return schemeFor(o.GetObjectKind().GroupVersionKind().Group)
	case runtime.Object:
		if kinds, _, err := apiextensionsapiserver.Scheme.ObjectKinds(o); err == nil && len(kinds) > 0 && kinds[0].Group == apiextensions.GroupName {
			return apiextensionsapiserver.Scheme
		}
	}
	return legacyscheme.Scheme
}

// builtinKind reports whether a kind is served from a scheme (built-in
// types and CustomResourceDefinitions) rather than from a CRD.
func builtinKind(gvk k8sschema.GroupVersionKind) bool {
	return schemeFor(gvk.Group).Recognizes(gvk)
}
