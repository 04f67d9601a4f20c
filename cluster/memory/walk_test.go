package memory

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
)

// TestWalkMatchesList: Walk shows the objects List returns (by name,
// namespace and metadata), in List's order, for a kind in all namespaces
// and in one, a kind with none stored and another version of a kind; an
// unknown kind is NotFound for both.
func TestWalkMatchesList(t *testing.T) {
	ctx := context.Background()
	cm := func(ns, name string) *unstructured.Unstructured {
		return object(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, labels: {app: %s}}\n", name, ns, name))
	}
	c := newCluster(t, object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"),
		cm("default", "b"), cm("shop", "a"), cm("default", "a"), object(t, deployment))
	for _, tc := range []struct {
		gvk       schema.GroupVersionKind
		namespace string
		want      int
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "", 3},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "default", 2},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "", 1},
		{schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}, "", 0},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "", -1},
	} {
		type seen struct {
			Namespace, Name string
			Labels          map[string]string
		}
		var walked []seen
		walkErr := c.Walk(ctx, tc.gvk, tc.namespace, func(o *unstructured.Unstructured) {
			walked = append(walked, seen{o.GetNamespace(), o.GetName(), o.GetLabels()})
		})
		listed, listErr := c.List(ctx, tc.gvk, tc.namespace)
		var want []seen
		for _, o := range listed {
			want = append(want, seen{o.GetNamespace(), o.GetName(), o.GetLabels()})
		}
		if tc.want < 0 {
			if !apierrors.IsNotFound(walkErr) || !apierrors.IsNotFound(listErr) {
				t.Errorf("%s: Walk %v, List %v; want NotFound", tc.gvk.Kind, walkErr, listErr)
			}
			continue
		}
		if walkErr != nil || listErr != nil || len(walked) != tc.want || !reflect.DeepEqual(walked, want) {
			t.Errorf("%s in %q: Walk %v (%v), List %v (%v); want %d", tc.gvk.Kind, tc.namespace, walked, walkErr, want, listErr, tc.want)
		}
		var via []seen
		if err := cluster.Walk(ctx, c, tc.gvk, tc.namespace, func(o *unstructured.Unstructured) {
			via = append(via, seen{o.GetNamespace(), o.GetName(), o.GetLabels()})
		}); err != nil || !reflect.DeepEqual(via, walked) {
			t.Errorf("cluster.Walk: %v (%v), want %v", via, err, walked)
		}
	}
}
