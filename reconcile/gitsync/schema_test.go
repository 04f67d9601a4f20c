package gitsync

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
)

// crdSchema is the CRD's v1alpha1 schema as the API server compiles it.
func crdSchema(t *testing.T) (*apiextensionsv1.CustomResourceDefinition, *structuralschema.Structural, apiservervalidation.SchemaValidator) {
	t.Helper()
	u, err := CRD()
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, crd, true); err != nil {
		t.Fatalf("the CRD does not decode strictly: %v", err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != GVR.Version || crd.Spec.Group != GVR.Group ||
		crd.Spec.Names.Plural != GVR.Resource || crd.Spec.Names.Kind != GVK.Kind || crd.Name != GVR.Resource+"."+GVR.Group {
		t.Fatalf("the CRD does not define %s / %s", GVR, GVK)
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(crd.Spec.Versions[0].Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("the schema is not structural: %v", err)
	}
	if errs := structuralschema.ValidateStructural(nil, structural); len(errs) > 0 {
		t.Fatalf("the schema is not structural: %v", errs.ToAggregate())
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return crd, structural, validator
}

// TestSchemaKeepsEverything writes a GitSync with every field set through
// the fake server and checks that the CRD's schema neither prunes nor
// rejects any of it: a field the schema lacks would be dropped silently by
// the API server, and the state would not survive a restart.
func TestSchemaKeepsEverything(t *testing.T) {
	def, structural, validator := crdSchema(t)
	opts := reconcile.DefaultOptions()
	opts.Prune = true
	opts.Loop.HumanFieldManagers = []string{"k9s", "Lens"}
	opts.Rules = []ignore.Rule{
		{Tool: ignore.Flux, Source: "ks.yaml:1", Field: "spec.ignore[0]", JSONPointers: []string{"/spec/replicas"},
			Target: ignore.Target{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web", Namespace: "shop", LabelSelector: "a=b", AnnotationSelector: "c=d"}},
		{Tool: ignore.ArgoCD, Source: "app.yaml:1", Field: "spec.ignoreDifferences[0]", JQPathExpressions: []string{".spec.x"},
			ManagedFieldsManagers: []string{"hpa"}, Target: ignore.Target{Kind: "Deployment"}},
	}
	spec := SpecFor(manifest.GitSource{URL: "https://example.com/fleet.git", Ref: "main", Path: "apps"}, opts, 90*time.Second, []string{"policies/"})
	srv, client := newFake(t)
	hpa := contest(deployment, "/spec/replicas", reconcile.Writer{Manager: "hpa", Operation: "Update"}, int64(3), map[string]any{"a": []any{1.5, nil}})
	adm := contest(deployment, "/metadata/labels/x", reconcile.Writer{Admission: "MutatingAdmissionPolicy/p (binding b)"}, nil, "y")
	st := &reconcile.Status{Source: "fleet", Revision: "main@sha1:2", AppliedRevision: "main@sha1:1", LastSync: since,
		Applied: 1, Unchanged: 2, Pruned: 3, Failed: 4, Errors: []string{"e"}, Contested: []reconcile.Contest{hpa, adm},
		Reverted: []reconcile.ManualEdit{{Ref: deployment, Pointer: "/spec/replicas", Writer: reconcile.Writer{Manager: "kubectl", Operation: "Update scale"},
			Git: int64(3), Live: map[string]any{"a": []any{1.5, nil}}}},
		State: reconcile.State{Inventory: []cluster.Ref{namespace, crd, deployment}, Contested: []reconcile.Contest{hpa, adm}}}
	store := NewStore(client, "truce-system", "app", spec)
	if err := store.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if err := store.RecordFailure(context.Background(), errors.New(strings.Repeat("é", 5000))); err != nil {
		t.Fatal(err)
	}
	obj := srv.obj.DeepCopy()
	// Through JSON as the server decodes a body: numbers are int64 or float64.
	var content map[string]any
	if err := fromValue(obj.Object, &content); err != nil {
		t.Fatal(err)
	}
	pruned := runtime.DeepCopyJSON(content)
	unknown := structuralpruning.PruneWithOptions(pruned, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(unknown) > 0 {
		t.Errorf("the schema prunes %v", unknown)
	}
	if diff := cmp.Diff(content, pruned); diff != "" {
		t.Errorf("pruning changed the object (-written +pruned):\n%s", diff)
	}
	if errs := apiservervalidation.ValidateCustomResource(field.NewPath(""), content, validator); len(errs) > 0 {
		t.Errorf("the schema rejects the object: %v", errs.ToAggregate())
	}
	for _, col := range def.Spec.Versions[0].AdditionalPrinterColumns {
		path := strings.TrimPrefix(col.JSONPath, ".")
		if strings.Contains(path, "[") || strings.HasPrefix(path, "metadata.") {
			continue // the conditions filter; metadata the server sets
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(content, strings.Split(path, ".")...); !found {
			t.Errorf("printer column %s: %s is not written", col.Name, col.JSONPath)
		}
	}
}
