package admission

import (
	"context"
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/warning"

	"github.com/truce-dev/truce/admission/builtin"
	"github.com/truce-dev/truce/schema"
)

// customResource is what the apiextensions-apiserver builds per CRD
// version to serve it (customresource_handler.go, getOrCreateServingInfoFor):
// the structural schema for pruning and defaulting, and the registry
// strategy with OpenAPI and CEL validation.
type customResource struct {
	structural *structuralschema.Structural
	preserve   bool
	strategy   builtin.Strategy
}

func newCustomResource(res *schema.Resource) (*customResource, error) {
	crd := res.CRD
	version := res.GVR.Version
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil {
		return nil, fmt.Errorf("CRD %s does not serve version %s", crd.Name, version)
	}
	var internalSchema *apiextensionsinternal.JSONSchemaProps
	var structural *structuralschema.Structural
	if v.Schema != nil {
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("converting the schema of CRD %s: %w", crd.Name, err)
		}
		internalSchema = internal.OpenAPIV3Schema
		s, err := structuralschema.NewStructural(internalSchema)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("the schema of CRD %s version %s is not structural: %w", crd.Name, version, err)
		}
		if s != nil && !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return nil, fmt.Errorf("pruning defaults of CRD %s: %w", crd.Name, err)
			}
		}
		structural = s
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internalSchema)
	if err != nil {
		return nil, fmt.Errorf("compiling the schema of CRD %s: %w", crd.Name, err)
	}
	var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale
	if v.Subresources != nil && v.Subresources.Status != nil {
		statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if internalSchema != nil && internalSchema.Properties != nil {
			if st, ok := internalSchema.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
					return nil, err
				}
			}
		}
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		scaleSpec = &apiextensionsinternal.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(v.Subresources.Scale, scaleSpec, nil); err != nil {
			return nil, err
		}
	}
	strategy := customresource.NewStrategy(typer{}, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, res.GVK(),
		validator, statusValidator, structural, statusSpec, scaleSpec, v.SelectableFields)
	return &customResource{structural: structural, preserve: crd.Spec.PreserveUnknownFields, strategy: strategy}, nil
}

// customResourceCodec decodes custom resources like the CRD handler's
// request codec: prune unknown fields (reported per field validation),
// coerce metadata, then apply structural defaults.
type customResourceCodec struct {
	resource *schema.Resource
	cr       *customResource
}

func (c customResourceCodec) decode(ctx context.Context, in *unstructured.Unstructured, fieldValidation string) (runtime.Object, error) {
	u := in.DeepCopy()
	unknown, err := c.coerce(u, fieldValidation != metav1.FieldValidationIgnore)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(unknown) > 0 {
		switch fieldValidation {
		case metav1.FieldValidationStrict:
			errs := make([]error, len(unknown))
			for i, f := range unknown {
				errs[i] = fmt.Errorf("unknown field %q", f)
			}
			return nil, decodeError(in.GroupVersionKind(), runtime.NewStrictDecodingError(errs))
		case metav1.FieldValidationWarn:
			for _, f := range unknown {
				warning.AddWarning(ctx, "", fmt.Sprintf("unknown field %q", f))
			}
		}
	}
	if c.cr.structural != nil {
		structuraldefaulting.Default(u.Object, c.cr.structural)
	}
	return u, nil
}

// coerce is unstructuredSchemaCoercer.apply of the CRD handler.
func (c customResourceCodec) coerce(u *unstructured.Unstructured, track bool) ([]string, error) {
	kind := u.GetKind()
	apiVersion := u.GetAPIVersion()
	objectMeta, foundMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: track})
	if err != nil {
		return nil, err
	}
	if !c.cr.preserve && c.cr.structural != nil {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, c.cr.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, c.cr.structural)
	}
	fieldErr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, c.cr.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track})
	if fieldErr != nil {
		return nil, fieldErr
	}
	unknown = append(unknown, paths...)
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// encode returns the object as the CRD handler's storage codec returns it:
// pruned and with metadata coerced on the way in (schemaCoercingConverter,
// reporting nothing: the client did not send what a webhook added), and
// defaulted on the way out.
func (c customResourceCodec) encode(obj runtime.Object, gvk k8sschema.GroupVersionKind) (*unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("custom resource is %T, not unstructured", obj)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	if _, err := c.coerce(out, false); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if c.cr.structural != nil {
		structuraldefaulting.Default(out.Object, c.cr.structural)
	}
	return out, nil
}

// structuralSchema returns the structural schema of a custom resource's
// version, for the object defaulter; nil for built-ins.
func (c *Chain) structuralSchema(gvk k8sschema.GroupVersionKind) *structuralschema.Structural {
	r, err := c.registry.ForKind(gvk)
	if err != nil || r.CRD == nil {
		return nil
	}
	cr, err := c.customResourceFor(r)
	if err != nil {
		return nil
	}
	return cr.structural
}
