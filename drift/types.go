package drift

import (
	"context"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/schema"
)

// typedCluster is implemented by clusters that know the structured type of
// every kind they store (cluster/memory).
type typedCluster interface {
	TypeConverter(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error)
}

// TypeConvertersFor gives the strategies that need field types (Argo CD's)
// the types of c: the in-process cluster's own registry, or the built-in
// types plus the CRDs read from a live cluster on first use of their group.
func TypeConvertersFor(ctx context.Context, c cluster.Cluster) TypeConverters {
	// A cluster that wraps another (the simulation's write log) has its
	// types.
	if tc, ok := cluster.As[typedCluster](c); ok {
		return tc.TypeConverter
	}
	var (
		mu  sync.Mutex
		reg *schema.Registry
	)
	return func(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
		mu.Lock()
		defer mu.Unlock()
		if reg == nil {
			var err error
			if reg, err = schema.NewRegistry(); err != nil {
				return nil, err
			}
		}
		if tc, err := reg.TypeConverter(gv); err == nil {
			return tc, nil
		}
		if err := addLiveCRDs(ctx, c, reg, gv.Group); err != nil {
			return nil, err
		}
		return reg.TypeConverter(gv)
	}
}

// addLiveCRDs reads the CRDs of group from a live cluster into reg.
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
