package cli

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
)

// TestClientGoSchemeHasNoCRDKind: Flux's server-side apply normalisation
// (fluxcd/pkg/ssa normalize, inside its ResourceManager) converts objects
// through client-go's shared kubernetes/scheme.Scheme, so what is
// registered there changes how truce predicts Flux's drift detection.
// kustomize-controller does not link Helm and its shared scheme has no
// CustomResourceDefinition; a library linked into truce that registers
// apiextensions there turns a caBundle loop on a CRD into Synced (Helm
// v4.3.1 does twice: pkg/kube's init, and pkg/chart/common when it builds
// DefaultVersionSet; render/helm/scheme.go puts the scheme back). This
// test binary links what the truce binary links.
func TestClientGoSchemeHasNoCRDKind(t *testing.T) {
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		{Group: "apiextensions.k8s.io", Version: "v1beta1", Kind: "CustomResourceDefinition"},
	} {
		if clientscheme.Scheme.Recognizes(gvk) {
			t.Errorf("client-go's shared scheme recognises %s; a linked library registered it", gvk)
		}
	}
}
