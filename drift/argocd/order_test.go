package argocd

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// orderObj is "Kind[/namespace]/name[@wave]"; a CRD's spec names the kind
// "Widget" of group "example.com".
func orderObj(spec string) *unstructured.Unstructured {
	wave := ""
	if i := strings.IndexByte(spec, '@'); i >= 0 {
		spec, wave = spec[:i], spec[i+1:]
	}
	parts := strings.Split(spec, "/")
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetKind(parts[0])
	switch parts[0] {
	case "CustomResourceDefinition":
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.Object["spec"] = map[string]any{"group": "example.com", "names": map[string]any{"kind": "Widget"}}
	case "Widget":
		u.SetAPIVersion("example.com/v1")
	case "Deployment":
		u.SetAPIVersion("apps/v1")
	default:
		u.SetAPIVersion("v1")
	}
	u.SetName(parts[len(parts)-1])
	if len(parts) == 3 {
		u.SetNamespace(parts[1])
	}
	if wave != "" {
		u.SetAnnotations(map[string]string{AnnotationSyncWave: wave})
	}
	return u
}

func TestSyncOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{name: "namespace before the deployment in it, whatever the file order",
			in:   []string{"Deployment/shop/web", "Namespace/shop"},
			want: []string{"Namespace/shop", "Deployment/shop/web"}},
		{name: "CRD before its custom resources; unknown kinds last",
			in:   []string{"Widget/shop/w", "CustomResourceDefinition/widgets.example.com", "ConfigMap/shop/c"},
			want: []string{"ConfigMap/shop/c", "CustomResourceDefinition/widgets.example.com", "Widget/shop/w"}},
		{name: "Helm's kind order, then names",
			in:   []string{"Service/shop/b", "Deployment/shop/a", "Secret/shop/z", "ServiceAccount/shop/y", "Service/shop/a"},
			want: []string{"ServiceAccount/shop/y", "Secret/shop/z", "Service/shop/a", "Service/shop/b", "Deployment/shop/a"}},
		{name: "a lower wave goes first, whatever its kind",
			in:   []string{"Namespace/shop", "Deployment/shop/web", "MutatingAdmissionPolicy/mirror@-1"},
			want: []string{"MutatingAdmissionPolicy/mirror@-1", "Namespace/shop", "Deployment/shop/web"}},
		{name: "a namespace in a later wave moves before the first object in it",
			in:   []string{"Namespace/shop@5", "ConfigMap/other/c@1", "Deployment/shop/web@2"},
			want: []string{"ConfigMap/other/c@1", "Namespace/shop@5", "Deployment/shop/web@2"}},
		{name: "a CRD in a later wave moves before its first custom resource",
			in:   []string{"CustomResourceDefinition/widgets.example.com@3", "Widget/shop/w@1", "Widget/shop/v@2"},
			want: []string{"CustomResourceDefinition/widgets.example.com@3", "Widget/shop/w@1", "Widget/shop/v@2"}},
		{name: "a wave that is not a number is wave 0",
			in:   []string{"ConfigMap/shop/b@soon", "ConfigMap/shop/a@1"},
			want: []string{"ConfigMap/shop/b@soon", "ConfigMap/shop/a@1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := make([]*unstructured.Unstructured, len(tc.in))
			for i, s := range tc.in {
				objs[i] = orderObj(s)
			}
			order := SyncOrder(objs)
			got := make([]string, len(order))
			for i, at := range order {
				got[i] = tc.in[at]
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWave(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        int
	}{
		{nil, 0},
		{map[string]string{AnnotationSyncWave: "-2"}, -2},
		{map[string]string{AnnotationHelmHookWeight: "4"}, 4},
		{map[string]string{AnnotationSyncWave: "1", AnnotationHelmHookWeight: "4"}, 1},
		{map[string]string{AnnotationSyncWave: "x", AnnotationHelmHookWeight: "4"}, 4},
	} {
		t.Run(fmt.Sprint(tc.annotations), func(t *testing.T) {
			u := orderObj("ConfigMap/c")
			u.SetAnnotations(tc.annotations)
			if got := Wave(u); got != tc.want {
				t.Errorf("Wave = %d, want %d", got, tc.want)
			}
		})
	}
}
