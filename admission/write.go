package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/deprecation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"github.com/truce-dev/truce/admission/builtin"
	"github.com/truce-dev/truce/schema"
)

type writeRequest struct {
	resource *schema.Resource
	in       *unstructured.Unstructured
	existing *unstructured.Unstructured
	op       k8sadmission.Operation
	// verb is the request's: create, update or patch.
	verb            string
	namespace       string
	userInfo        user.Info
	rec             *recorder
	fieldValidation string
	// fieldManager names the writer in managedFields.
	fieldManager string
	// apply makes in a server-side apply configuration, merged into the
	// live object; force takes over conflicting fields.
	apply, force bool
	// dryRun is what admission is told; truce never persists by itself.
	dryRun bool
	// patchType and patch make the write a PATCH of existing: the patch
	// is applied to the stored object before admission (apply above is
	// the apply patch type).
	patchType types.PatchType
	patch     []byte
}

// write follows the server's authorization filter and the endpoint
// installer's deprecation warning, then its create or update handler.
func (c *Chain) write(ctx context.Context, w writeRequest) (*unstructured.Unstructured, *metav1.Status) {
	cd, strategy, err := c.handlerFor(w.resource)
	if err != nil {
		return nil, responsewriters.ErrorToAPIStatus(apierrors.NewInternalError(err))
	}
	// The authorization filter runs before the handler decodes the body.
	authzNamespace := w.namespace
	if w.resource.GVR.GroupResource() == (k8sschema.GroupResource{Resource: "namespaces"}) {
		// A namespace is authorized at the cluster scope; only admission
		// sees its own name as the request namespace.
		authzNamespace = ""
	}
	if s := c.authorize(ctx, w.resource, w.verb, "", authzNamespace, w.in.GetName(), w.userInfo); s != nil {
		return nil, s
	}
	if w.patchType != "" && w.existing == nil {
		// Only an apply patch creates; the other patchers answer NotFound.
		return nil, responsewriters.ErrorToAPIStatus(apierrors.NewNotFound(w.resource.GVR.GroupResource(), w.in.GetName()))
	}
	addDeprecationWarning(ctx, w.resource)
	var stored *unstructured.Unstructured
	if w.op == k8sadmission.Create {
		stored, err = c.create(ctx, w, cd, strategy)
	} else {
		stored, err = c.update(ctx, w, cd, strategy)
	}
	if err != nil {
		return nil, responsewriters.ErrorToAPIStatus(err)
	}
	return stored, nil
}

// create follows the server's create handler
// (k8s.io/apiserver/pkg/endpoints/handlers/create.go) and the generic
// registry store's Create: decode with defaulting, record the writer's
// fields, mutating admission, the registry strategy, validating admission.
func (c *Chain) create(ctx context.Context, w writeRequest, cd codec, strategy builtin.Strategy) (*unstructured.Unstructured, error) {
	options := &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}, DryRun: w.dryRunOption(), FieldManager: w.fieldManager}
	obj, err := c.decodeBody(ctx, w, cd, strategy, nil)
	if err != nil {
		return nil, err
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	rest.WipeObjectMetaSystemFields(accessor)
	if !w.apply {
		// The handler records the writer's fields before mutating admission.
		if obj, err = c.trackFields(w, strategy, obj, nil); err != nil {
			return nil, err
		}
	}
	if obj, err = c.mutate(ctx, w, obj, nil, options); err != nil {
		return nil, err
	}
	// Admission may have replaced the object.
	if accessor, err = meta.Accessor(obj); err != nil {
		return nil, err
	}
	rest.FillObjectMetaSystemFields(accessor)
	if accessor.GetGenerateName() != "" && accessor.GetName() == "" {
		accessor.SetName(strategy.GenerateName(accessor.GetGenerateName()))
	}
	if c.isServices(w.resource) {
		if _, err := c.services.BeginCreate(ctx, obj, options); err != nil {
			return nil, err
		}
	}
	if err := rest.BeforeCreate(strategy, ctx, obj); err != nil {
		return nil, err
	}
	if err := c.validate(ctx, w, obj, nil, accessor.GetName(), options); err != nil {
		return nil, err
	}
	stored, err := c.store(w, cd, obj)
	if err != nil {
		return nil, err
	}
	// Storage assigns a resourceVersion; a dry run answers with none.
	stored.SetResourceVersion("")
	return stored, nil
}

// update follows the server's update handler
// (k8s.io/apiserver/pkg/endpoints/handlers/update.go) and the generic
// registry store's Update: the stored object is the old one, the write's
// fields update its managedFields, and the store checks the
// resourceVersion after mutating admission.
func (c *Chain) update(ctx context.Context, w writeRequest, cd codec, strategy builtin.Strategy) (*unstructured.Unstructured, error) {
	options := &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"}, DryRun: w.dryRunOption(), FieldManager: w.fieldManager}
	if w.patchType != "" {
		// A patch's options are its PatchOptions as UpdateOptions
		// (the patch handler's patchToUpdateOptions).
		options.FieldValidation = w.fieldValidation
	}
	old, err := cd.decode(ctx, w.existing, metav1.FieldValidationIgnore)
	if err != nil {
		return nil, fmt.Errorf("decoding the existing object: %w", err)
	}
	obj, err := c.decodeBody(ctx, w, cd, strategy, old)
	if err != nil {
		return nil, err
	}
	if _, err := meta.Accessor(obj); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if !w.apply {
		if obj, err = c.trackFields(w, strategy, obj, old); err != nil {
			return nil, err
		}
	}
	if obj, err = c.mutate(ctx, w, obj, old, options); err != nil {
		return nil, err
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if err := checkResourceVersion(w.resource, accessor, old); err != nil {
		return nil, err
	}
	if c.isServices(w.resource) {
		if _, err := c.services.BeginUpdate(ctx, obj, old, options); err != nil {
			return nil, err
		}
	}
	if err := rest.BeforeUpdate(strategy, ctx, obj, old); err != nil {
		return nil, err
	}
	if err := c.validate(ctx, w, obj, old, accessor.GetName(), options); err != nil {
		return nil, err
	}
	return c.store(w, cd, obj)
}

// dryRunOption is the request's dryRun parameter.
func (w writeRequest) dryRunOption() []string {
	if w.dryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// decodeBody turns the body of the write into the object admission sees:
// decoded with defaults, or for a server-side apply merged into old (nil
// for a create).
func (c *Chain) decodeBody(ctx context.Context, w writeRequest, cd codec, strategy builtin.Strategy, old runtime.Object) (runtime.Object, error) {
	if w.apply {
		return c.applyPatch(w, strategy, old)
	}
	if w.patchType != "" {
		return c.patchObject(ctx, w, cd, old)
	}
	return cd.decode(ctx, w.in, w.fieldValidation)
}

// mutate runs mutating admission on obj in the object's namespace and
// returns the object admission leaves (it may replace it).
func (c *Chain) mutate(ctx context.Context, w writeRequest, obj, old runtime.Object, options runtime.Object) (runtime.Object, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForResource(w.namespace, w.resource.GVR), accessor); err != nil {
		return nil, err
	}
	attrs := k8sadmission.NewAttributesRecord(obj, old, w.resource.GVK(), w.namespace, w.in.GetName(),
		w.resource.GVR, "", w.op, options, w.dryRun, w.userInfo)
	if err := c.admit.(k8sadmission.MutationInterface).Admit(ctx, attrs, c.objects); err != nil {
		return nil, err
	}
	c.recordPolicyCandidates(w.rec, attrs)
	return attrs.GetObject(), nil
}

// validate runs validating admission on a copy of the final object, as the
// store does.
func (c *Chain) validate(ctx context.Context, w writeRequest, obj, old runtime.Object, name string, options runtime.Object) error {
	final := k8sadmission.NewAttributesRecord(obj.DeepCopyObject(), old, w.resource.GVK(), w.namespace, name,
		w.resource.GVR, "", w.op, options, w.dryRun, w.userInfo)
	return c.admit.(k8sadmission.ValidationInterface).Validate(ctx, final, c.objects)
}

// store returns the object as the store answers with it.
func (c *Chain) store(w writeRequest, cd codec, obj runtime.Object) (*unstructured.Unstructured, error) {
	if c.isServices(w.resource) && c.services.Decorator != nil {
		// The store decorates what it returns (defaulting on read).
		c.services.Decorator(obj)
	}
	return cd.encode(obj, w.resource.GVK())
}

func (c *Chain) isServices(r *schema.Resource) bool {
	return r.CRD == nil && r.GVR.GroupResource() == k8sschema.GroupResource{Resource: "services"}
}

// checkResourceVersion applies the store's optimistic concurrency to an
// update. truce models an UPDATE as a client that read the stored object
// and PUTs its change: a write without resourceVersion carries the stored
// one; a write naming another one than the stored one is a 409 Conflict.
// Objects written by hand into the cluster state have no resourceVersion;
// then the write's own is taken as current.
func checkResourceVersion(r *schema.Resource, obj metav1.Object, old runtime.Object) error {
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return err
	}
	stored := oldMeta.GetResourceVersion()
	switch {
	case stored == "" && obj.GetResourceVersion() == "":
		// Neither side knows one; use what a store would have.
		obj.SetResourceVersion("1")
		oldMeta.SetResourceVersion("1")
	case stored == "":
		oldMeta.SetResourceVersion(obj.GetResourceVersion())
	case obj.GetResourceVersion() == "":
		obj.SetResourceVersion(stored)
	case obj.GetResourceVersion() != stored:
		return apierrors.NewConflict(r.GVR.GroupResource(), obj.GetName(), errors.New(optimisticLockErrorMsg))
	}
	return nil
}

// optimisticLockErrorMsg is the storage layer's message for a stale
// resourceVersion (k8s.io/apiserver/pkg/registry/generic/registry).
const optimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

// addDeprecationWarning warns about deprecated API versions, as the
// server's endpoint installer does on every request to one, and the CRD
// handler for a custom resource version its CRD marks deprecated.
func addDeprecationWarning(ctx context.Context, r *schema.Resource) {
	if r.CRD != nil {
		if w, ok := crdDeprecationWarning(r.CRD, r.GVR.Version); ok {
			warning.AddWarning(ctx, "", w)
		}
		return
	}
	versioned, err := schemeFor(r.GVR.Group).New(r.GVK())
	if err != nil {
		return
	}
	versioned.GetObjectKind().SetGroupVersionKind(r.GVK())
	if deprecation.IsDeprecated(versioned, kubernetesMajor, kubernetesMinor) {
		warning.AddWarning(ctx, "", deprecation.WarningMessage(versioned))
	}
}

// crdDeprecationWarning is the warning apiextensions-apiserver's CRD
// handler gives every request to version of crd when the CRD marks it
// deprecated: its deprecationWarning, else the default that names the
// newest served version not deprecated (customresource_handler.go,
// defaultDeprecationWarning, unexported there).
func crdDeprecationWarning(crd *apiextensionsv1.CustomResourceDefinition, v string) (string, bool) {
	i := slices.IndexFunc(crd.Spec.Versions, func(cv apiextensionsv1.CustomResourceDefinitionVersion) bool { return cv.Name == v })
	if i < 0 || !crd.Spec.Versions[i].Deprecated {
		return "", false
	}
	if w := crd.Spec.Versions[i].DeprecationWarning; w != nil {
		return *w, true
	}
	msg := fmt.Sprintf("%s/%s %s is deprecated", crd.Spec.Group, v, crd.Spec.Names.Kind)
	newest := ""
	for _, cv := range crd.Spec.Versions {
		if cv.Served && !cv.Deprecated && version.CompareKubeAwareVersionStrings(v, cv.Name) < 0 &&
			(newest == "" || version.CompareKubeAwareVersionStrings(cv.Name, newest) > 0) {
			newest = cv.Name
		}
	}
	if newest != "" {
		msg += fmt.Sprintf("; use %s/%s %s", crd.Spec.Group, newest, crd.Spec.Names.Kind)
	}
	return msg, true
}

// codec decodes the body of a write into the form admission sees (the
// internal version for built-ins) and encodes the result back.
type codec interface {
	decode(ctx context.Context, in *unstructured.Unstructured, fieldValidation string) (runtime.Object, error)
	encode(obj runtime.Object, gvk k8sschema.GroupVersionKind) (*unstructured.Unstructured, error)
}

// handlerFor returns how the server decodes and stores a resource: the
// legacy scheme and the upstream registry strategy for built-ins, the
// apiextensions-apiserver's scheme and strategy for CustomResourceDefinitions,
// the CRD handler's codec and strategy for custom resources.
func (c *Chain) handlerFor(r *schema.Resource) (codec, builtin.Strategy, error) {
	if r.CRD == nil {
		sc := codecFor(r.GVR.Group)
		if isCRDs(r) {
			return sc, crdStrategy, nil
		}
		if c.isServices(r) {
			return sc, c.services.CreateStrategy.(builtin.Strategy), nil
		}
		if s, ok := c.configStrategies[r.GVR.GroupResource()]; ok {
			return sc, s, nil
		}
		if s, ok := builtin.StrategyFor(r.GVR.GroupResource()); ok {
			return sc, s, nil
		}
		return sc, metadataOnlyStrategy{namespaced: r.Namespaced}, nil
	}
	cr, err := c.customResourceFor(r)
	if err != nil {
		return nil, nil, err
	}
	return customResourceCodec{resource: r, cr: cr}, cr.strategy, nil
}

// customResourceFor returns the serving information of a custom resource,
// built once per chain.
func (c *Chain) customResourceFor(r *schema.Resource) (*customResource, error) {
	c.crMu.Lock()
	defer c.crMu.Unlock()
	cr, ok := c.customResources[r.GVR]
	if !ok {
		var err error
		if cr, err = newCustomResource(r); err != nil {
			return nil, err
		}
		c.customResources[r.GVR] = cr
	}
	return cr, nil
}

// modelled reports whether the resource is validated exactly like the server
// validates it.
func (c *Chain) modelled(r *schema.Resource) bool {
	if r.CRD != nil || isCRDs(r) || c.isServices(r) {
		return true
	}
	if _, ok := c.configStrategies[r.GVR.GroupResource()]; ok {
		return true
	}
	_, ok := builtin.StrategyFor(r.GVR.GroupResource())
	return ok
}

// schemeCodec decodes and encodes the objects of a scheme's groups like the
// server's request scope for them: the scheme's codec factory decodes into
// the internal version with defaulting, the scheme converts back.
type schemeCodec struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
}

// builtinCodec is the codec of the groups of the legacy scheme.
var builtinCodec = schemeCodec{scheme: legacyscheme.Scheme, codecs: legacyscheme.Codecs}

func (c schemeCodec) decode(ctx context.Context, in *unstructured.Unstructured, fieldValidation string) (runtime.Object, error) {
	body, err := json.Marshal(in.Object)
	if err != nil {
		return nil, err
	}
	return c.decodeBytes(ctx, body, in.GroupVersionKind(), fieldValidation)
}

// decodeBytes decodes a JSON body of kind gvk into the internal version,
// defaulting it.
func (c schemeCodec) decodeBytes(ctx context.Context, body []byte, gvk k8sschema.GroupVersionKind, fieldValidation string) (runtime.Object, error) {
	info, ok := runtime.SerializerInfoForMediaType(c.codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("no JSON serializer")
	}
	serializer := info.Serializer
	if fieldValidation == metav1.FieldValidationWarn || fieldValidation == metav1.FieldValidationStrict {
		serializer = info.StrictSerializer
	}
	internal := k8sschema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
	decoder := c.codecs.DecoderToVersion(serializer, internal)
	obj, _, err := decoder.Decode(body, &gvk, nil)
	if err != nil {
		strict, isStrict := runtime.AsStrictDecodingError(err)
		if isStrict && obj != nil && fieldValidation == metav1.FieldValidationWarn {
			for _, e := range strict.Errors() {
				warning.AddWarning(ctx, "", e.Error())
			}
		} else {
			return nil, decodeError(gvk, err)
		}
	}
	return obj, nil
}

// decodeError words a decoding failure like the handlers' transformDecodeError.
func decodeError(gvk k8sschema.GroupVersionKind, err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
}

func (c schemeCodec) encode(obj runtime.Object, gvk k8sschema.GroupVersionKind) (*unstructured.Unstructured, error) {
	out, err := c.scheme.ConvertToVersion(obj, gvk.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("converting to %s: %w", gvk.GroupVersion(), err)
	}
	return versionedToUnstructured(out, gvk)
}

// versionedToUnstructured turns a typed object already in gvk's version
// into its unstructured form.
func versionedToUnstructured(obj runtime.Object, gvk k8sschema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
