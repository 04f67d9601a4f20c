package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// Namespaces tells the webhook the namespaces of a live cluster: their
// labels decide which bindings' namespaceSelectors match.
type Namespaces interface {
	// Namespace returns the namespace, false when it is not known.
	Namespace(name string) (*corev1.Namespace, bool)
}

// WatchNamespaces returns the namespaces of the cluster behind client,
// kept current by an informer until ctx ends. It needs get, list and watch
// on namespaces and nothing else.
func WatchNamespaces(ctx context.Context, client kubernetes.Interface) (Namespaces, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0)
	lister := factory.Core().V1().Namespaces().Lister()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("listing namespaces (%v): the informer did not sync", typ)
		}
	}
	return liveNamespaces{lister}, nil
}

type liveNamespaces struct{ lister listersv1.NamespaceLister }

func (l liveNamespaces) Namespace(name string) (*corev1.Namespace, bool) {
	ns, err := l.lister.Get(name)
	return ns, err == nil
}

// ensureNamespace makes the request's namespace known to the policies
// before they run. The API server only sends requests in namespaces that
// exist (NamespaceLifecycle runs first), so an unknown namespace is not an
// error: its labels come from the live source when there is one, from
// --cluster when it describes it, and otherwise it is assumed to carry only
// the kubernetes.io/metadata.name label every namespace has.
func (h *Handler) ensureNamespace(ctx context.Context, set *policySet, name string) error {
	if name == "" {
		return nil
	}
	var live *corev1.Namespace
	if h.opts.Namespaces != nil {
		if ns, ok := h.opts.Namespaces.Namespace(name); ok {
			live = ns
		}
	}
	key := name
	if live != nil {
		key += "@" + live.ResourceVersion
	}
	if _, ok := set.namespaces.Load(key); ok {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
	switch {
	case live != nil:
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: live.Labels, Annotations: live.Annotations}}
	case set.chain.HasNamespace(ctx, name):
		set.namespaces.Store(key, true)
		return nil
	default:
		h.log.Info("namespace not described by --cluster; assuming only the kubernetes.io/metadata.name label", "namespace", name)
	}
	if err := set.chain.PutNamespace(ctx, ns); err != nil {
		return err
	}
	set.namespaces.Store(key, true)
	return nil
}
