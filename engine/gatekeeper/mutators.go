package gatekeeper

import (
	"errors"
	"fmt"
	"sync"

	gkapis "github.com/open-policy-agent/gatekeeper/v3/apis"
	mutationsunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	mutationsv1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1"
	mutationsv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1alpha1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	mutationsGroup = "mutations.gatekeeper.sh"
	configGroup    = "config.gatekeeper.sh"
)

// scheme converts the mutators' served versions to the unversioned types
// Gatekeeper's constructors take, with Gatekeeper's generated conversions.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := gkapis.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("registering Gatekeeper's API types: %v", err))
	}
	return s
}()

// mutatorKinds build a mutator from each kind as Gatekeeper's mutator
// controllers do (pkg/controller/mutators/instances): the object as the
// server stores it (the CRDs' storage version, "None" conversion, so every
// served version decodes into it), converted to the unversioned type, given
// to the mutator's own constructor.
var mutatorKinds = map[string]func(*unstructured.Unstructured) (types.Mutator, error){
	"Assign": func(u *unstructured.Unstructured) (types.Mutator, error) {
		v, un := &mutationsv1.Assign{}, &mutationsunversioned.Assign{}
		if err := convert(u, v, un); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssign(un)
	},
	"AssignMetadata": func(u *unstructured.Unstructured) (types.Mutator, error) {
		v, un := &mutationsv1.AssignMetadata{}, &mutationsunversioned.AssignMetadata{}
		if err := convert(u, v, un); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignMetadata(un)
	},
	"ModifySet": func(u *unstructured.Unstructured) (types.Mutator, error) {
		v, un := &mutationsv1.ModifySet{}, &mutationsunversioned.ModifySet{}
		if err := convert(u, v, un); err != nil {
			return nil, err
		}
		return mutators.MutatorForModifySet(un)
	},
	"AssignImage": func(u *unstructured.Unstructured) (types.Mutator, error) {
		v, un := &mutationsv1alpha1.AssignImage{}, &mutationsunversioned.AssignImage{}
		if err := convert(u, v, un); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignImage(un)
	},
}

func convert(u *unstructured.Unstructured, versioned, unversioned runtime.Object) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, versioned); err != nil {
		return err
	}
	return scheme.Convert(versioned, unversioned, nil)
}

// MutatorError is a mutator Gatekeeper would not ingest: its controller
// reports the error in the mutator's status and leaves it out of the
// system.
type MutatorError struct {
	Kind, Name string
	Err        error
}

func (e *MutatorError) Error() string {
	return fmt.Sprintf("Gatekeeper %s %s: %v", e.Kind, e.Name, e.Err)
}

func (e *MutatorError) Unwrap() error { return e.Err }

// mutationSystem returns Gatekeeper's mutation system holding the mutators
// among objs, and the mutators it could not ingest. A mutator whose
// implied schema conflicts with another's is ingested and, as in
// Gatekeeper, neither is applied.
func mutationSystem(objs []*unstructured.Unstructured, flags Flags) (*mutation.System, []error) {
	sys := mutation.NewSystem(mutation.SystemOpts{})
	var errs []error
	for _, o := range objs {
		if o.GroupVersionKind().Group != mutationsGroup {
			continue
		}
		if _, ok := mutatorKinds[o.GetKind()]; !ok {
			continue
		}
		st, err := stored(o)
		if err != nil {
			errs = append(errs, &MutatorError{Kind: o.GetKind(), Name: o.GetName(), Err: err})
			continue
		}
		m, err := buildMutator(st, flags)
		if err != nil {
			errs = append(errs, &MutatorError{Kind: o.GetKind(), Name: o.GetName(), Err: err})
			continue
		}
		if err := sys.Upsert(m); err != nil {
			var conflict schema.ErrConflictingSchema
			if !errors.As(err, &conflict) {
				errs = append(errs, &MutatorError{Kind: o.GetKind(), Name: o.GetName(), Err: err})
			}
		}
	}
	return sys, errs
}

// storedSchemas are the structural schemas of the mutator kinds' and
// ConstraintTemplate's versions in the CRDs Gatekeeper ships: the API
// server stores them with their CRD's defaults applied (a ModifySet's
// operation defaults to merge, a v1beta1 template's legacySchema to true),
// and Gatekeeper's controllers read the stored object.
var storedSchemas = sync.OnceValue(func() map[k8sschema.GroupVersionKind]*structuralschema.Structural {
	out := map[k8sschema.GroupVersionKind]*structuralschema.Structural{}
	for _, o := range shipped() {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			panic(fmt.Sprintf("decoding Gatekeeper's CRD %s: %v", o.GetName(), err))
		}
		if crd.Spec.Group != mutationsGroup && crd.Spec.Group != templatesGroup {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil {
				continue
			}
			internal := &apiextensionsinternal.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
				panic(fmt.Sprintf("converting the schema of Gatekeeper's CRD %s: %v", crd.Name, err))
			}
			s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
			if err != nil {
				panic(fmt.Sprintf("the schema of Gatekeeper's CRD %s is not structural: %v", crd.Name, err))
			}
			out[k8sschema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = s
		}
	}
	return out
})

// stored is the mutator or template as Gatekeeper's controller reads it
// from the API server: defaulted by its CRD's schema of the version it was written in,
// and decoded from JSON as Kubernetes decodes it, integers as int64 (a
// mutator read from YAML as float64 numbers would not find the object's
// int64 values equal: a ModifySet would merge a number twice).
func stored(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	raw, err := o.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if s, ok := storedSchemas()[out.GroupVersionKind()]; ok {
		structuraldefaulting.Default(out.Object, s)
	}
	return out, nil
}

// buildMutator builds o, a stored object of a kind of mutatorKinds, as
// Gatekeeper's mutator controllers and webhook do, under flags. With
// --enable-external-data=false, Gatekeeper's own check
// (ExternalData.Validate, which reads the process's flag, left on in
// truce) refuses a mutator that takes external data: that check's answer
// is given here.
func buildMutator(o *unstructured.Unstructured, flags Flags) (types.Mutator, error) {
	m, err := mutatorKinds[o.GetKind()](o)
	if !flags.ExternalData && (err == nil || errors.Is(err, mutationsunversioned.ErrExternalDataNoDefault)) {
		if _, has, _ := unstructured.NestedMap(o.Object, "spec", "parameters", "assign", "externalData"); has {
			return nil, mutationsunversioned.ErrExternalDataFeatureFlag
		}
	}
	return m, err
}
