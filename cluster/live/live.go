// Package live is a real cluster behind the cluster.Cluster interface,
// through client-go's dynamic client and discovery.
package live

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/truce-dev/truce/cluster"
)

// Cluster is a real cluster.
type Cluster struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	calls  *atomic.Int64
	// mappings caches the mapper's answers: the deferred mapper locks and
	// walks every group's mapper on each lookup, a tenth of a sync's client
	// CPU when every request looked its kind up.
	mappings sync.Map // schema.GroupVersionKind -> *meta.RESTMapping
}

var _ cluster.Cluster = (*Cluster)(nil)

// Load returns a client config from a kubeconfig file (empty: the usual
// KUBECONFIG / ~/.kube/config rules, or in-cluster) and a context name
// (empty: the current context).
func Load(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// New returns a cluster reached with cfg. It counts the requests it makes.
func New(cfg *rest.Config) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	calls := &atomic.Int64{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, calls: calls}
	})
	if cfg.UserAgent == "" {
		cfg.UserAgent = "truce"
	}
	// client-go's default of 5 requests/s makes a 1,000-object sync take
	// minutes; use kustomize-controller's defaults unless set.
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 300
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return &Cluster{client: client, mapper: mapper, calls: calls}, nil
}

type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.calls.Add(1)
	return t.next.RoundTrip(r)
}

// Calls returns the number of HTTP requests made, discovery included.
func (c *Cluster) Calls() int64 { return c.calls.Load() }

// RESTMapper maps kinds with the server's discovery, refreshed when a kind
// is not found (a CRD created since).
func (c *Cluster) RESTMapper() meta.RESTMapper { return refreshingMapper{c.mapper, c} }

// refreshingMapper is the deferred discovery mapper with the Cluster's
// cache and refresh for single-version lookups, the ones callers make.
type refreshingMapper struct {
	*restmapper.DeferredDiscoveryRESTMapper
	c *Cluster
}

func (m refreshingMapper) RESTMapping(gk k8sschema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) == 1 && versions[0] != "" {
		return m.c.mapping(gk.WithVersion(versions[0]))
	}
	mapping, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.c.forget()
		mapping, err = m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	}
	return mapping, err
}

// mapping maps gvk to its resource, refreshing discovery once when the
// kind is not known (a CRD created since).
func (c *Cluster) mapping(gvk k8sschema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := c.mappings.Load(gvk); ok {
		return m.(*meta.RESTMapping), nil
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.forget()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	c.mappings.Store(gvk, m)
	return m, nil
}

// forget drops what discovery said, so the next lookup asks again.
func (c *Cluster) forget() {
	c.mappings.Clear()
	c.mapper.Reset()
}

// unserved forgets the mappings when err is the bare 404 a server answers
// for a resource it does not serve (any more): a CRD deleted, or a version
// dropped from it. It returns err.
func (c *Cluster) unserved(err error) error {
	if apierrors.IsNotFound(err) && apierrors.IsUnexpectedServerError(err) {
		c.forget()
	}
	return err
}

func (c *Cluster) resource(gvk k8sschema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("mapping %s to a resource: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameRoot {
		return c.client.Resource(m.Resource), nil
	}
	return c.client.Resource(m.Resource).Namespace(namespace), nil
}

func dryRun(on bool) []string {
	if on {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// Get reads one object.
func (c *Cluster) Get(ctx context.Context, ref cluster.Ref) (*unstructured.Unstructured, error) {
	r, err := c.resource(ref.GroupVersionKind, ref.Namespace)
	if err != nil {
		return nil, err
	}
	obj, err := r.Get(ctx, ref.Name, metav1.GetOptions{})
	return obj, c.unserved(err)
}

// List reads the objects of a kind.
func (c *Cluster) List(ctx context.Context, gvk k8sschema.GroupVersionKind, namespace string) ([]*unstructured.Unstructured, error) {
	r, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	list, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c.unserved(err)
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Create is a POST.
func (c *Cluster) Create(ctx context.Context, obj *unstructured.Unstructured, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	r, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Create(ctx, obj, metav1.CreateOptions{FieldManager: opts.FieldManager, DryRun: dryRun(opts.DryRun)})
	return out, c.unserved(err)
}

// Update is a PUT.
func (c *Cluster) Update(ctx context.Context, obj *unstructured.Unstructured, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	r, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Update(ctx, obj, metav1.UpdateOptions{FieldManager: opts.FieldManager, DryRun: dryRun(opts.DryRun)})
	return out, c.unserved(err)
}

// Apply is a server-side apply PATCH.
func (c *Cluster) Apply(ctx context.Context, obj *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, error) {
	r, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", cluster.RefOf(obj), err)
	}
	force := opts.Force
	out, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: opts.FieldManager, Force: &force, DryRun: dryRun(opts.DryRun),
	})
	return out, c.unserved(err)
}

// Patch is a PATCH of the stored object.
func (c *Cluster) Patch(ctx context.Context, ref cluster.Ref, pt types.PatchType, patch []byte, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	r, err := c.resource(ref.GroupVersionKind, ref.Namespace)
	if err != nil {
		return nil, err
	}
	out, err := r.Patch(ctx, ref.Name, pt, patch, metav1.PatchOptions{FieldManager: opts.FieldManager, DryRun: dryRun(opts.DryRun)})
	return out, c.unserved(err)
}

// Delete is a DELETE with background propagation, as kubectl and Flux use.
func (c *Cluster) Delete(ctx context.Context, ref cluster.Ref, opts cluster.DeleteOptions) error {
	r, err := c.resource(ref.GroupVersionKind, ref.Namespace)
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationBackground
	return c.unserved(r.Delete(ctx, ref.Name, metav1.DeleteOptions{PropagationPolicy: &policy, DryRun: dryRun(opts.DryRun)}))
}
