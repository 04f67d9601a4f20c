package helm

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Helm's pkg/chart/common registers the apiextensions.k8s.io kinds
// (CustomResourceDefinition) in client-go's shared scheme when it loads
// (helm/helm#32468; the fix, helm/helm#32470, is not released). Flux's
// server-side apply normalisation (fluxcd/pkg/ssa) reads that scheme, and
// kustomize-controller, which does not link Helm, does not know those
// kinds there: with them registered, truce would judge CRDs unlike Flux
// does. So, once Helm has loaded and computed its default capabilities,
// the shared scheme is put back to what it held before, less those kinds.
// Remove this when Helm no longer registers them.
func init() {
	if err := withoutAPIExtensions(clientgoscheme.Scheme); err != nil {
		panic(fmt.Sprintf("restoring client-go's scheme after Helm: %v", err))
	}
}

const apiExtensionsGroup = "apiextensions.k8s.io"

// withoutAPIExtensions rebuilds s from client-go's own registration and
// every other kind s knows, leaving out the apiextensions.k8s.io group.
func withoutAPIExtensions(s *runtime.Scheme) error {
	fresh := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(fresh); err != nil {
		return err
	}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Group == apiExtensionsGroup || fresh.Recognizes(gvk) {
			continue
		}
		obj, ok := reflect.New(t).Interface().(runtime.Object)
		if !ok {
			continue
		}
		fresh.AddKnownTypeWithName(gvk, obj)
	}
	*s = *fresh
	return nil
}
