package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/truce-dev/truce/schema"
)

// Review is what an admission webhook is asked: one request at the point of
// the server's chain where the webhook runs. The objects are what the
// server sends, already decoded, defaulted and mutated by what ran before.
type Review struct {
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation Operation
	// Kind is the kind of Object and OldObject (after conversion to the
	// version the webhook asked for); Resource and SubResource are what was
	// written.
	Kind        k8sschema.GroupVersionKind
	Resource    k8sschema.GroupVersionResource
	SubResource string
	// RequestKind and RequestResource are what the client wrote when the
	// server converted the objects to Kind for the webhook (matchPolicy
	// Equivalent). Policies match the request as written, as they do
	// in-tree; empty means the same as Kind and Resource.
	RequestKind     k8sschema.GroupVersionKind
	RequestResource k8sschema.GroupVersionResource
	Namespace       string
	Name            string
	// Object and OldObject are JSON; empty when the operation has none
	// (no Object on DELETE, no OldObject on CREATE).
	Object, OldObject []byte
	// Options are the operation's options (CreateOptions, ...) as JSON.
	Options  []byte
	UserInfo user.Info
	DryRun   bool
	// Attribute fills ReviewResult.Changes, at the cost of diffing the
	// object around every mutating step.
	Attribute bool
}

// ReviewResult is the answer to a Review.
type ReviewResult struct {
	Allowed bool
	// Status is the rejection; nil when allowed.
	Status *metav1.Status
	// Object is the object after mutation as JSON, nil when no plugin
	// changed it (it may equal the input when a plugin replaced the object
	// with an equal one). Base is the object before the first change,
	// through the same decoding and encoding: the difference between Base
	// and Object is admission's alone (no defaults, no pruned fields).
	Object, Base []byte
	// Changes say which field which policy changed (with Review.Attribute).
	Changes          []Change
	Warnings         []string
	AuditAnnotations map[string]string
}

// Mutate runs a Review through the chain's mutating admission (with
// reinvocation), as a mutating webhook serving the chain's policies
// answers it. Only admission runs: the server that sent the review has
// already authorized, decoded and defaulted the request.
func (c *Chain) Mutate(ctx context.Context, r Review) (*ReviewResult, error) {
	return c.review(ctx, r, true)
}

// Validate runs a Review through the chain's validating admission.
func (c *Chain) Validate(ctx context.Context, r Review) (*ReviewResult, error) {
	return c.review(ctx, r, false)
}

func (c *Chain) review(ctx context.Context, r Review, mutate bool) (*ReviewResult, error) {
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	resource, err := c.registry.ForKind(r.Kind)
	switch {
	case err == nil:
	case builtinKind(r.Kind) && !r.Resource.Empty() && (r.SubResource != "" || r.Operation == Connect):
		// A subresource's or a connection's own kind (autoscaling/v1
		// Scale of deployments/scale, Eviction, PodExecOptions): no
		// resource serves it as its main kind; the scheme decodes it.
		resource = &schema.Resource{GVR: r.Kind.GroupVersion().WithResource(r.Resource.Resource), Kind: r.Kind.Kind, Namespaced: r.Namespace != ""}
	case !builtinKind(r.Kind) && !r.Resource.Empty():
		// A custom resource whose CRD the chain was not given: evaluated
		// without a schema (no pruning, no defaults; an ApplyConfiguration
		// mutation needs the schema and fails per its failurePolicy).
		resource = schemalessResource(r)
	default:
		return nil, err
	}
	op, err := admissionOperation(r.Operation)
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	ctx, warnings, err := requestScope(ctx, rec, resource, verbFor(op), r.Namespace, r.Name, r.UserInfo)
	if err != nil {
		return nil, err
	}
	codec, _, err := c.handlerFor(resource)
	if err != nil {
		return nil, err
	}
	obj, err := c.decodeReviewObject(ctx, codec, resource, r.Object)
	if err != nil {
		return nil, &BadReviewError{fmt.Errorf("decoding object: %w", err)}
	}
	old, err := c.decodeReviewObject(ctx, codec, resource, r.OldObject)
	if err != nil {
		return nil, &BadReviewError{fmt.Errorf("decoding oldObject: %w", err)}
	}
	options, err := reviewOptions(op, r.Options)
	if err != nil {
		return nil, err
	}
	kind, gvr := r.Kind, r.Resource
	if gvr.Empty() {
		gvr = resource.GVR
	}
	if !r.RequestKind.Empty() && !r.RequestResource.Empty() && r.RequestKind != r.Kind {
		// Built-ins decode into the internal version, the same for both
		// kinds; a custom resource's versions differ by apiVersion only.
		kind, gvr = r.RequestKind, r.RequestResource
		for _, o := range []runtime.Object{obj, old} {
			if u, ok := o.(*unstructured.Unstructured); ok {
				u.SetGroupVersionKind(kind)
			}
		}
	}
	attrs := k8sadmission.NewAttributesRecord(obj, old, kind, r.Namespace, r.Name, gvr, r.SubResource, op, options, r.DryRun, r.UserInfo)
	res := &ReviewResult{Allowed: true}
	var admitErr error
	if mutate {
		if m, ok := c.admit.(k8sadmission.MutationInterface); ok && m.Handles(op) {
			admitErr = m.Admit(ctx, attrs, c.objects)
		}
	} else if v, ok := c.admit.(k8sadmission.ValidationInterface); ok && v.Handles(op) {
		admitErr = v.Validate(ctx, attrs, c.objects)
	}
	res.Warnings = warnings.list()
	rec.annotations = audit.AuditContextFrom(ctx).GetEventAnnotations()
	res.AuditAnnotations = rec.annotations
	if admitErr != nil {
		res.Allowed = false
		res.Status = statusOf(admitErr)
		return res, nil
	}
	if !mutate || len(rec.steps) == 0 || attrs.GetObject() == nil {
		return res, nil
	}
	if r.Attribute {
		c.recordPolicyCandidates(rec, attrs)
		if res.Changes, err = c.changes(rec, resource); err != nil {
			return nil, err
		}
		if len(res.Changes) == 0 {
			// A plugin replaced the object with an equal one.
			return res, nil
		}
	}
	if res.Object, err = encodeJSON(codec, attrs.GetObject(), r.Kind); err != nil {
		return nil, fmt.Errorf("encoding the mutated object: %w", err)
	}
	// The object before the first change, encoded the same way: what
	// differs between the two is admission's doing, not the round trip's.
	if res.Base, err = encodeJSON(codec, rec.steps[0].before, r.Kind); err != nil {
		return nil, fmt.Errorf("encoding the object: %w", err)
	}
	return res, nil
}

func encodeJSON(cd codec, obj runtime.Object, gvk k8sschema.GroupVersionKind) ([]byte, error) {
	out, err := cd.encode(obj, gvk)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out.Object)
}

// decodeReviewObject decodes an object of a review into the form admission
// sees, as the server decodes a webhook's patched object: with defaulting,
// which a server-sent object already has.
func (c *Chain) decodeReviewObject(ctx context.Context, cd codec, r *schema.Resource, body []byte) (runtime.Object, error) {
	if len(body) == 0 || string(body) == "null" {
		return nil, nil
	}
	if sc, ok := cd.(schemeCodec); ok {
		return sc.decodeBytes(ctx, body, r.GVK(), metav1.FieldValidationIgnore)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		return nil, err
	}
	if u.GroupVersionKind() != r.GVK() {
		return nil, fmt.Errorf("object is a %s, the request says %s", u.GroupVersionKind(), r.GVK())
	}
	return cd.decode(ctx, u, metav1.FieldValidationIgnore)
}

func admissionOperation(op Operation) (k8sadmission.Operation, error) {
	switch op {
	case Create:
		return k8sadmission.Create, nil
	case Update:
		return k8sadmission.Update, nil
	case Delete:
		return k8sadmission.Delete, nil
	case Connect:
		return k8sadmission.Connect, nil
	}
	return "", fmt.Errorf("unknown operation %q (want CREATE, UPDATE, DELETE or CONNECT)", op)
}

// reviewOptions decodes the options of a review; policies see them as
// request.options.
func reviewOptions(op k8sadmission.Operation, raw []byte) (runtime.Object, error) {
	var options runtime.Object
	switch op {
	case k8sadmission.Create:
		options = &metav1.CreateOptions{}
	case k8sadmission.Update:
		options = &metav1.UpdateOptions{}
	case k8sadmission.Delete:
		options = &metav1.DeleteOptions{}
	default:
		return nil, nil
	}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, options); err != nil {
			return nil, fmt.Errorf("decoding options: %w", err)
		}
	}
	return options, nil
}

// WebhookOptions are the Options of a chain that serves its policies as a
// webhook: only the two policy plugins run, so that the webhook never calls
// webhooks (its own configuration included) and never repeats the built-in
// plugins the calling server has already run.
func WebhookOptions() Options {
	keep := map[string]bool{"MutatingAdmissionPolicy": true, "ValidatingAdmissionPolicy": true}
	var disable []string
	for _, p := range DefaultPlugins() {
		if !keep[p] {
			disable = append(disable, p)
		}
	}
	return Options{EnablePlugins: []string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"}, DisablePlugins: disable}
}

// PutNamespace creates or replaces a Namespace the policies see (their
// namespaceSelectors and the namespaceObject variable), as a webhook learns
// the namespaces of a live cluster. The cluster state is not changed.
func (c *Chain) PutNamespace(ctx context.Context, ns *corev1.Namespace) error {
	// The namespace is not part of the state the memo's keys digest: from
	// now on, what the chain remembers is its own.
	defer c.memo.isolate()
	namespaces := c.client.CoreV1().Namespaces()
	_, err := namespaces.Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = namespaces.Update(ctx, ns, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("recording namespace %s: %w", ns.Name, err)
	}
	// The policies read namespaces from an informer: wait until it has
	// the new labels, so the write decides the very next request.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = c.mirror.waitUntil(wctx, func() bool {
		got, err := c.namespaces.Get(ns.Name)
		return err == nil && equality.Semantic.DeepEqual(got.Labels, ns.Labels)
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s to reach the policies: %w", ns.Name, err)
	}
	return nil
}

// HasNamespace reports whether the policies know the namespace.
func (c *Chain) HasNamespace(ctx context.Context, name string) bool {
	_, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	return err == nil
}

// schemalessCRDName marks the CustomResourceDefinition made up for a custom
// resource the chain has no CRD for.
const schemalessCRDName = "schemaless.truce.dev"

// schemalessResource describes a custom resource by what a review says of
// it, with a schema that keeps every field.
func schemalessResource(r Review) *schema.Resource {
	preserve := true
	scope := apiextensionsv1.ClusterScoped
	if r.Namespace != "" {
		scope = apiextensionsv1.NamespaceScoped
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: schemalessCRDName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: r.Resource.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: r.Resource.Resource, Kind: r.Kind.Kind},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: r.Resource.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
	return &schema.Resource{GVR: r.Resource, Kind: r.Kind.Kind, Namespaced: r.Namespace != "", CRD: crd}
}

// BadReviewError is a review whose object or oldObject cannot be decoded
// as the kind the request names: the sender's error (HTTP 400 from a
// webhook), not the evaluation's.
type BadReviewError struct{ Err error }

func (e *BadReviewError) Error() string { return e.Err.Error() }
func (e *BadReviewError) Unwrap() error { return e.Err }
