package schema

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

func TestBuiltinResources(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		gvk        k8sschema.GroupVersionKind
		resource   string
		namespaced bool
		subs       []string
		wantErr    bool
	}{
		{gvk: k8sschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, resource: "deployments", namespaced: true, subs: []string{"scale", "status"}},
		{gvk: k8sschema.GroupVersionKind{Version: "v1", Kind: "Pod"}, resource: "pods", namespaced: true, subs: []string{"status", "ephemeralcontainers", "binding"}},
		{gvk: k8sschema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, resource: "namespaces", subs: []string{"finalize", "status"}},
		{gvk: k8sschema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicy"}, resource: "mutatingadmissionpolicies"},
		{gvk: k8sschema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, resource: "customresourcedefinitions"},
		// Alpha and beta versions a default server does not serve.
		{gvk: k8sschema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1alpha1", Kind: "MutatingAdmissionPolicy"}, wantErr: true},
		{gvk: k8sschema.GroupVersionKind{Group: "apps", Version: "v1beta1", Kind: "Deployment"}, wantErr: true},
		{gvk: k8sschema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.gvk.String(), func(t *testing.T) {
			res, err := reg.ForKind(tt.gvk)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ForKind(%v) = %v, want an error", tt.gvk, res.GVR)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.GVR.Resource != tt.resource || res.Namespaced != tt.namespaced {
				t.Errorf("got %s namespaced=%v, want %s namespaced=%v", res.GVR.Resource, res.Namespaced, tt.resource, tt.namespaced)
			}
			for _, s := range tt.subs {
				if _, ok := res.Subresources[s]; !ok {
					t.Errorf("subresource %s missing: %v", s, res.Subresources)
				}
			}
			mapping, err := reg.RESTMapper().RESTMapping(tt.gvk.GroupKind(), tt.gvk.Version)
			if err != nil || mapping.Resource != res.GVR {
				t.Errorf("RESTMapping = %v, %v; want %v", mapping, err, res.GVR)
			}
		})
	}
}

func TestServedVersionsInError(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.ForKind(k8sschema.GroupVersionKind{Group: "autoscaling", Version: "v2beta2", Kind: "HorizontalPodAutoscaler"})
	want := `no kind "HorizontalPodAutoscaler" is registered for version "autoscaling/v2beta2"; served versions: autoscaling/v1, autoscaling/v2`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestEventsAreEquivalentAcrossGroups(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	got := reg.EquivalentResourceMapper().EquivalentResourcesFor(k8sschema.GroupVersionResource{Version: "v1", Resource: "events"}, "")
	want := map[k8sschema.GroupVersionResource]bool{
		{Version: "v1", Resource: "events"}:                         true,
		{Group: "events.k8s.io", Version: "v1", Resource: "events"}: true,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("unexpected equivalent %v", g)
		}
	}
	if got := reg.EquivalentResourceMapper().EquivalentResourcesFor(k8sschema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ""); len(got) != 1 {
		t.Fatalf("deployments have no equivalents in 1.37, got %v", got)
	}
}

func TestTypeConverterKnowsBuiltins(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := reg.TypeConverter(k8sschema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := tc.ObjectToTyped(mustDeployment(t))
	if err != nil {
		t.Fatal(err)
	}
	// containers is a list-map keyed by name in the real schema (a deduced
	// converter would make it atomic): merging a second container by name
	// keeps the first.
	patch := mustDeployment(t)
	patch.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "b", "image": "y"}}
	typedPatch, err := tc.ObjectToTyped(patch)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := typed.Merge(typedPatch)
	if err != nil {
		t.Fatal(err)
	}
	u, err := tc.TypedToObject(merged)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := u.(interface{ UnstructuredContent() map[string]any })
	list := m.UnstructuredContent()["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	if len(list) != 2 {
		t.Fatalf("merged containers = %v, want both a and b", list)
	}
}

func TestCRDDocumentAndTypeConverter(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}},
				}},
			}},
		},
	}
	if err := reg.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	res, err := reg.ForKind(k8sschema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	if err != nil || res.Namespaced || res.GVR.Resource != "widgets" || res.CRD == nil {
		t.Fatalf("got %+v, %v", res, err)
	}
	paths, err := reg.OpenAPIClient().Paths()
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := paths["apis/example.com/v1"]
	if !ok {
		t.Fatalf("no OpenAPI path for the CRD's group-version")
	}
	if _, err := doc.Schema("application/json"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.TypeConverter(k8sschema.GroupVersion{Group: "example.com", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
}
