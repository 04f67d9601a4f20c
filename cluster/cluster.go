// Package cluster is where objects live. Cluster is one interface with two
// implementations: memory (an in-process cluster whose write path is truce's
// admission chain, the embedded default) and live (a real cluster through
// client-go). Drift, simulation and sync use only this interface.
package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Cluster reads and writes objects with the API server's semantics: writes
// pass admission, server-side apply merges by field ownership and records
// managedFields, dry runs change nothing. Errors are API status errors
// (k8s.io/apimachinery/pkg/api/errors), so callers test them with
// apierrors.IsNotFound, IsConflict, IsInvalid and so on.
type Cluster interface {
	// Get returns the object, converted to ref's version.
	Get(ctx context.Context, ref Ref) (*unstructured.Unstructured, error)
	// List returns the objects of a kind; an empty namespace means all.
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]*unstructured.Unstructured, error)
	// Create is a POST: it fails with AlreadyExists when the object exists.
	Create(ctx context.Context, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, error)
	// Update is a PUT of the whole object.
	Update(ctx context.Context, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, error)
	// Apply is a server-side apply (PATCH application/apply-patch+yaml); it
	// creates the object when it does not exist.
	Apply(ctx context.Context, obj *unstructured.Unstructured, opts ApplyOptions) (*unstructured.Unstructured, error)
	// Patch is a PATCH of the stored object with a strategic merge, JSON
	// merge or JSON patch (kubectl patch, and the patch kubectl apply
	// computes on the client): the server applies it to the stored object
	// before admission. It fails with NotFound when the object does not
	// exist.
	Patch(ctx context.Context, ref Ref, pt types.PatchType, patch []byte, opts WriteOptions) (*unstructured.Unstructured, error)
	// Delete removes the object.
	Delete(ctx context.Context, ref Ref, opts DeleteOptions) error
	// RESTMapper maps kinds to resources and tells which are namespaced.
	RESTMapper() meta.RESTMapper
}

// VersionReader is implemented by clusters that can tell an object's
// resourceVersion without a copy of it: the simulated GitOps tools ask it
// for every object of Git every round, to reuse their last comparison.
type VersionReader interface {
	// ResourceVersion is Get(ctx, ref)'s resourceVersion, with Get's errors.
	ResourceVersion(ctx context.Context, ref Ref) (string, error)
}

// As finds in c, or in the cluster c wraps (an Unwrap() Cluster method,
// as the simulation's write log has: it wraps another for its writes and
// reads through it), the first that implements T.
func As[T any](c Cluster) (T, bool) {
	for inner := c; ; {
		if v, ok := inner.(T); ok {
			return v, true
		}
		w, ok := inner.(interface{ Unwrap() Cluster })
		if !ok {
			var zero T
			return zero, false
		}
		inner = w.Unwrap()
	}
}

// ResourceVersion returns the live resourceVersion of ref: through the
// VersionReader of c (see As) when there is one, else from a Get.
func ResourceVersion(ctx context.Context, c Cluster, ref Ref) (string, error) {
	if v, ok := As[VersionReader](c); ok {
		return v.ResourceVersion(ctx, ref)
	}
	o, err := c.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	return o.GetResourceVersion(), nil
}

// Walker is implemented by clusters that can show the objects of a kind
// without copying them: the simulated Argo CD looks for the objects it
// tracks among all objects of Git's kinds every round.
type Walker interface {
	// Walk calls fn with each object List(ctx, gvk, namespace) would
	// return, with List's errors, but as stored: in the version the
	// cluster stores, which fn must not change, keep, or use to call the
	// cluster.
	Walk(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*unstructured.Unstructured)) error
}

// Walk calls fn with each object of gvk's kind in namespace (in all when
// empty): through the Walker of c (see As) when there is one, else from a
// List. Only what every version of an object shares (metadata) is to be
// read from what fn is given.
func Walk(ctx context.Context, c Cluster, gvk schema.GroupVersionKind, namespace string, fn func(*unstructured.Unstructured)) error {
	if w, ok := As[Walker](c); ok {
		return w.Walk(ctx, gvk, namespace, fn)
	}
	objs, err := c.List(ctx, gvk, namespace)
	if err != nil {
		return err
	}
	for _, o := range objs {
		fn(o)
	}
	return nil
}

// CallCounter is implemented by clusters that count the API requests they
// make (or, for the in-process cluster, answer).
type CallCounter interface {
	Calls() int64
}

// Ref names one object.
type Ref struct {
	schema.GroupVersionKind
	Namespace string
	Name      string
}

// refJSON is how a Ref reads in JSON output: as in an object reference.
type refJSON struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// MarshalJSON writes r as {apiVersion, kind, namespace, name}.
func (r Ref) MarshalJSON() ([]byte, error) {
	return json.Marshal(refJSON{APIVersion: r.GroupVersion().String(), Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Ref) UnmarshalJSON(b []byte) error {
	var j refJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	gv, err := schema.ParseGroupVersion(j.APIVersion)
	if err != nil {
		return fmt.Errorf("object reference: %w", err)
	}
	*r = Ref{GroupVersionKind: gv.WithKind(j.Kind), Namespace: j.Namespace, Name: j.Name}
	return nil
}

// RefOf returns the reference of obj.
func RefOf(obj *unstructured.Unstructured) Ref {
	return Ref{GroupVersionKind: obj.GroupVersionKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func (r Ref) String() string {
	kind := r.Kind
	if r.Group != "" {
		kind += "." + r.Group
	}
	if r.Namespace == "" {
		return fmt.Sprintf("%s/%s", kind, r.Name)
	}
	return fmt.Sprintf("%s/%s/%s", kind, r.Namespace, r.Name)
}

// WriteOptions are the options of a create or an update.
type WriteOptions struct {
	// FieldManager names the writer in managedFields.
	FieldManager string
	DryRun       bool
}

// ApplyOptions are the options of a server-side apply.
type ApplyOptions struct {
	// FieldManager is required: the applier whose field set this is.
	FieldManager string
	// Force takes over fields that other managers own instead of failing
	// with a conflict.
	Force  bool
	DryRun bool
}

// DeleteOptions are the options of a delete.
type DeleteOptions struct {
	DryRun bool
}
