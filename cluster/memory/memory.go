// Package memory is the embedded default cluster: an in-process object store
// whose write path is truce's admission chain (the same one `truce admit`
// runs) and whose server-side apply and managedFields are the API server's
// own (k8s.io/apimachinery/pkg/util/managedfields, inside the chain).
package memory

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
)

// Cluster is an in-process cluster. It is safe for concurrent use; writes
// are serialised, as etcd serialises writes to one key.
type Cluster struct {
	mu    sync.Mutex
	ctx   context.Context
	opts  admission.Options
	state *admission.State
	chain *admission.Chain
	// rv is the last resourceVersion handed out, etcd's revision.
	rv    uint64
	calls atomic.Int64
	// observe, when set, sees the admission result of every write that is
	// not a dry run.
	observe func(admission.Request, *admission.Result)
	// rebuildEveryWrite builds the chain again from the state after every
	// write, as the reference the mirrored writes are tested against.
	rebuildEveryWrite bool
	// builds counts the chains built after writes.
	builds int
}

var _ cluster.Cluster = (*Cluster)(nil)

// New returns a cluster holding state, admitting writes with opts. Objects
// of state without a resourceVersion get one. ctx bounds the chain's
// background informers; Close releases them earlier.
func New(ctx context.Context, state *admission.State, opts admission.Options) (*Cluster, error) {
	c := &Cluster{ctx: ctx, opts: opts, state: state}
	for _, o := range state.Objects() {
		if o.GetResourceVersion() == "" {
			c.rv++
			o.SetResourceVersion(strconv.FormatUint(c.rv, 10))
		} else if n, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64); err == nil && n > c.rv {
			c.rv = n
		}
	}
	chain, err := admission.NewChain(ctx, state, opts)
	if err != nil {
		return nil, err
	}
	c.chain = chain
	return c, nil
}

// Close stops the admission chain's informers.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chain.Close()
}

// Observe makes fn see the admission request and result of every write
// that is not a dry run, allowed or not: which admission step changed which
// field, and which webhooks could not be called. The simulation uses it to
// name the other writer of a loop fought inside the GitOps tool's own
// request. fn runs with the cluster locked and must not call it.
func (c *Cluster) Observe(fn func(admission.Request, *admission.Result)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe = fn
}

// Calls returns how many requests the cluster answered.
func (c *Cluster) Calls() int64 { return c.calls.Load() }

// Chain returns the admission chain in the write path, for callers that
// want what it records (field attribution) for a write.
func (c *Cluster) Chain() *admission.Chain {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chain
}

// RESTMapper maps kinds of the built-in API and of the cluster's CRDs.
func (c *Cluster) RESTMapper() meta.RESTMapper {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chain.Registry().RESTMapper()
}

// TypeConverter returns the structured type of a group version's kinds,
// built-in or from the cluster's CRDs.
func (c *Cluster) TypeConverter(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chain.Registry().TypeConverter(gv)
}

// Get returns a copy of the stored object in ref's version.
func (c *Cluster) Get(ctx context.Context, ref cluster.Ref) (*unstructured.Unstructured, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	gr, err := c.groupResource(ref.GroupVersionKind)
	if err != nil {
		return nil, err
	}
	o, ok := c.state.Get(ref.GroupKind(), ref.Namespace, ref.Name)
	if !ok {
		return nil, apierrors.NewNotFound(gr, ref.Name)
	}
	return admission.ConvertTo(o, ref.GroupVersionKind)
}

// ResourceVersion implements cluster.VersionReader: Get's answer without
// converting and copying the stored object (a version is the same in every
// apiVersion of the object).
func (c *Cluster) ResourceVersion(ctx context.Context, ref cluster.Ref) (string, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	gr, err := c.groupResource(ref.GroupVersionKind)
	if err != nil {
		return "", err
	}
	o, ok := c.state.Get(ref.GroupKind(), ref.Namespace, ref.Name)
	if !ok {
		return "", apierrors.NewNotFound(gr, ref.Name)
	}
	return o.GetResourceVersion(), nil
}

// List returns copies of the objects of a kind in one namespace, or in all
// when namespace is empty.
func (c *Cluster) List(ctx context.Context, gvk k8sschema.GroupVersionKind, namespace string) ([]*unstructured.Unstructured, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.groupResource(gvk); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	var err error
	c.state.Each(gvk.GroupKind(), namespace, func(o *unstructured.Unstructured) bool {
		var u *unstructured.Unstructured
		if u, err = admission.ConvertTo(o, gvk); err != nil {
			return false
		}
		out = append(out, u)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Walk implements cluster.Walker: List without converting and copying
// the stored objects.
func (c *Cluster) Walk(ctx context.Context, gvk k8sschema.GroupVersionKind, namespace string, fn func(*unstructured.Unstructured)) error {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.groupResource(gvk); err != nil {
		return err
	}
	c.state.Each(gvk.GroupKind(), namespace, func(o *unstructured.Unstructured) bool {
		fn(o)
		return true
	})
	return nil
}

// Create admits and stores a new object.
func (c *Cluster) Create(ctx context.Context, obj *unstructured.Unstructured, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	return c.write(ctx, obj, admission.Request{Object: obj, FieldManager: opts.FieldManager, Persist: !opts.DryRun}, mustNotExist, opts.DryRun)
}

// Update admits and stores a new version of an existing object.
func (c *Cluster) Update(ctx context.Context, obj *unstructured.Unstructured, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	return c.write(ctx, obj, admission.Request{Object: obj, FieldManager: opts.FieldManager, Persist: !opts.DryRun}, mustExist, opts.DryRun)
}

// Apply merges obj into the stored object by field ownership (or creates
// it), then admits and stores the result.
func (c *Cluster) Apply(ctx context.Context, obj *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, error) {
	req := admission.Request{Object: obj, FieldManager: opts.FieldManager, Apply: true, Force: opts.Force, Persist: !opts.DryRun}
	return c.write(ctx, obj, req, mayExist, opts.DryRun)
}

// Patch applies a strategic merge, JSON merge or JSON patch (kubectl
// patch, the patch kubectl apply computes) to the stored object, then
// admits and stores the result: the server's patch handler, through the
// same chain entry as truce admit.
func (c *Cluster) Patch(ctx context.Context, ref cluster.Ref, pt types.PatchType, patch []byte, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(ref.GroupVersionKind)
	target.SetNamespace(ref.Namespace)
	target.SetName(ref.Name)
	req := admission.Request{Object: target, FieldManager: opts.FieldManager, PatchType: pt, Patch: patch, Persist: !opts.DryRun}
	return c.write(ctx, target, req, mustExist, opts.DryRun)
}

// Delete removes an object after the server's admission for DELETE
// (NamespaceLifecycle keeps default, kube-system and kube-public; policies
// and webhooks matching DELETE answer); deleting a Namespace removes its
// contents at once (no finalizers, no graceful deletion).
func (c *Cluster) Delete(ctx context.Context, ref cluster.Ref, opts cluster.DeleteOptions) error {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	gr, err := c.groupResource(ref.GroupVersionKind)
	if err != nil {
		return err
	}
	if _, ok := c.state.Get(ref.GroupKind(), ref.Namespace, ref.Name); !ok {
		return apierrors.NewNotFound(gr, ref.Name)
	}
	res, err := c.chain.AdmitDelete(ctx, admission.DeleteRequest{GroupVersionKind: ref.GroupVersionKind,
		Namespace: ref.Namespace, Name: ref.Name, Persist: !opts.DryRun})
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if !res.Allowed {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: res.Code, Reason: metav1.StatusReason(res.Reason), Message: res.Message,
			Details: res.Details,
		}}
	}
	if opts.DryRun {
		return nil
	}
	c.rv++
	reconfigure, err := c.chain.Remove(ref.GroupKind(), ref.Namespace, ref.Name)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if reconfigure || c.rebuildEveryWrite {
		return c.rebuild()
	}
	return nil
}

type existence int

const (
	mayExist existence = iota
	mustExist
	mustNotExist
)

func (c *Cluster) write(ctx context.Context, obj *unstructured.Unstructured, req admission.Request, want existence, dryRun bool) (*unstructured.Unstructured, error) {
	c.calls.Add(1)
	if obj == nil {
		return nil, apierrors.NewBadRequest("no object to write")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gvk := obj.GroupVersionKind()
	gr, err := c.groupResource(gvk)
	if err != nil {
		return nil, err
	}
	namespace := obj.GetNamespace()
	if mapping, err := c.chain.Registry().RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil && mapping.Scope.Name() == meta.RESTScopeNameRoot {
		namespace = ""
	} else if namespace == "" {
		// A client puts a namespaced object without one into its default.
		namespace = metav1.NamespaceDefault
		obj = obj.DeepCopy()
		obj.SetNamespace(namespace)
		req.Object = obj
	}
	existing, exists := c.state.Get(gvk.GroupKind(), namespace, obj.GetName())
	switch {
	case want == mustNotExist && exists:
		return nil, apierrors.NewAlreadyExists(gr, obj.GetName())
	case want == mustExist && !exists:
		return nil, apierrors.NewNotFound(gr, obj.GetName())
	}
	res, err := c.chain.Admit(ctx, req)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if c.observe != nil && !dryRun {
		c.observe(req, res)
	}
	if !res.Allowed {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: res.Code, Reason: metav1.StatusReason(res.Reason), Message: res.Message,
			Details: res.Details,
		}}
	}
	stored := &unstructured.Unstructured{Object: res.Object}
	if exists {
		// The store writes nothing, and keeps the resourceVersion, when an
		// update changes nothing (etcd3 store, GuaranteedUpdate).
		candidate := stored.DeepCopy()
		candidate.SetResourceVersion(existing.GetResourceVersion())
		current, err := admission.ConvertTo(existing, gvk)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		// The store reverts managedFields timestamps when nothing else
		// changed, so a repeated apply stays a no-op.
		if reverted, err := fieldmanager.IgnoreManagedFieldsTimestampsTransformer(ctx, candidate, current); err == nil {
			if u, ok := reverted.(*unstructured.Unstructured); ok {
				candidate = u
			}
		}
		if equality.Semantic.DeepEqual(current.Object, candidate.Object) {
			return current, nil
		}
	}
	if dryRun {
		return stored.DeepCopy(), nil
	}
	c.rv++
	stored.SetResourceVersion(strconv.FormatUint(c.rv, 10))
	res.Object = stored.Object
	reconfigure, err := c.chain.Commit(res)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if reconfigure || c.rebuildEveryWrite {
		if err := c.rebuild(); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return stored.DeepCopy(), nil
}

// rebuild recompiles the admission chain from the state, after a write
// changed what admission reads (policies, webhooks, namespaces, CRDs...).
func (c *Cluster) rebuild() error {
	chain, err := admission.NewChain(c.ctx, c.state, c.opts)
	if err != nil {
		return fmt.Errorf("recompiling admission after a write: %w", err)
	}
	c.chain.Close()
	c.chain = chain
	c.builds++
	return nil
}

func (c *Cluster) groupResource(gvk k8sschema.GroupVersionKind) (k8sschema.GroupResource, error) {
	r, err := c.chain.Registry().ForKind(gvk)
	if err != nil {
		return k8sschema.GroupResource{}, apierrors.NewNotFound(k8sschema.GroupResource{Group: gvk.Group, Resource: gvk.Kind},
			fmt.Sprintf("the server could not find the requested resource (%s)", gvk))
	}
	return r.GVR.GroupResource(), nil
}

// Admit runs a write through the admission chain against the current
// state without storing it, and returns the chain's whole answer: the
// stored object, warnings and which step changed which field.
func (c *Cluster) Admit(ctx context.Context, req admission.Request) (*admission.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req.Persist = false
	return c.chain.Admit(ctx, req)
}

// ServesImmediately reports that a CustomResourceDefinition's kind is
// served as soon as it is stored: the in-process cluster has no
// establishing controller and never sets the CRD's Established condition,
// so callers must not wait for it.
func (c *Cluster) ServesImmediately() bool { return true }
