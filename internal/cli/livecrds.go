package cli

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/schema"
)

// addLiveCRDs reads the CRDs of group from a live cluster into reg, for
// type information about custom resources.
func addLiveCRDs(ctx context.Context, c cluster.Cluster, reg *schema.Registry, group string) error {
	crds, err := c.List(ctx, k8sschema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, "")
	if err != nil {
		return fmt.Errorf("reading CRDs for type information: %w", err)
	}
	for _, u := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			return fmt.Errorf("decoding CRD %s: %w", u.GetName(), err)
		}
		if crd.Spec.Group != group {
			continue
		}
		if err := reg.AddCRD(&crd); err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}
