package schema

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// Each group's versions come preferred first, as kube-apiserver's discovery
// lists them, and a kind asked for without a version maps to the
// preferred one.
func TestGroupVersions(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	versions := func(names ...string) []apiextensionsv1.CustomResourceDefinitionVersion {
		var out []apiextensionsv1.CustomResourceDefinitionVersion
		for i, n := range names {
			out = append(out, apiextensionsv1.CustomResourceDefinitionVersion{Name: n, Served: true, Storage: i == 0,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}})
		}
		return out
	}
	// Two CRDs of one group: its versions are the union, ordered.
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{{
		ObjectMeta: metav1.ObjectMeta{Name: "policies.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "policies", Singular: "policy", Kind: "Policy", ListKind: "PolicyList"},
			Versions: versions("v1", "v1alpha1")},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "exceptions.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "exceptions", Singular: "exception", Kind: "Exception", ListKind: "ExceptionList"},
			Versions: versions("v2alpha1", "v2beta1", "v2", "v10beta1")},
	}} {
		if err := reg.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
	}
	byGroup := map[string][]string{}
	for _, gv := range reg.GroupVersions() {
		byGroup[gv.Group] = append(byGroup[gv.Group], gv.Version)
	}
	for group, want := range map[string][]string{
		"":            {"v1"},
		"autoscaling": {"v2", "v1"},
		"example.com": {"v2", "v1", "v10beta1", "v2beta1", "v2alpha1", "v1alpha1"},
	} {
		if got := byGroup[group]; !slices.Equal(got, want) {
			t.Errorf("group %q: versions %v, want %v", group, got, want)
		}
	}
	for gk, want := range map[k8sschema.GroupKind]string{
		{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: "v2",
		{Group: "example.com", Kind: "Exception"}:               "v2",
		{Group: "example.com", Kind: "Policy"}:                  "v1",
	} {
		m, err := reg.RESTMapper().RESTMapping(gk)
		if err != nil {
			t.Fatal(err)
		}
		if m.GroupVersionKind.Version != want {
			t.Errorf("%s maps to %s, want %s", gk, m.GroupVersionKind.Version, want)
		}
	}
}
