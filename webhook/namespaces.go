package webhook

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// Namespaces tells the webhook the namespaces of a live cluster: their
// labels decide which bindings' namespaceSelectors match.
type Namespaces interface {
	// Namespace returns the namespace, false when it does not exist.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, bool)
}

// syncTimeout bounds the first list of namespaces: without RBAC the
// informer retries forever and the server would never listen.
const syncTimeout = time.Minute

// WatchNamespaces returns the namespaces of the cluster behind client,
// kept current by an informer until ctx ends; a namespace the informer has
// not seen yet (created a moment ago, with its workloads) is read with a
// GET, as the upstream policy matcher does. It needs get, list and watch
// on namespaces and nothing else.
func WatchNamespaces(ctx context.Context, client kubernetes.Interface) (Namespaces, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0)
	lister := factory.Core().V1().Namespaces().Lister()
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("listing namespaces (%v) did not finish within %s: can the service account get, list and watch namespaces?", typ, syncTimeout)
		}
	}
	return liveNamespaces{lister: lister, client: client}, nil
}

type liveNamespaces struct {
	lister listersv1.NamespaceLister
	client kubernetes.Interface
}

func (l liveNamespaces) Namespace(ctx context.Context, name string) (*corev1.Namespace, bool) {
	if ns, err := l.lister.Get(name); err == nil {
		return ns, true
	}
	ns, err := l.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	return ns, err == nil
}

// ensureNamespace makes the request's namespace known to the policies
// before they run. The API server only sends requests in namespaces that
// exist (NamespaceLifecycle runs first), so an unknown namespace is not an
// error: its labels come from the live source when there is one, from
// --cluster when it describes it, and otherwise it is assumed to carry only
// the kubernetes.io/metadata.name label every namespace has. Writes are
// serialised per set and only ever move to a newer resourceVersion, so
// concurrent requests cannot leave older labels in force.
func (h *Handler) ensureNamespace(ctx context.Context, set *policySet, name string) error {
	if name == "" {
		return nil
	}
	var live *corev1.Namespace
	if h.opts.Namespaces != nil {
		if ns, ok := h.opts.Namespaces.Namespace(ctx, name); ok {
			live = ns
		}
	}
	want := "assumed"
	if live != nil {
		want = "live@" + live.ResourceVersion
	}
	if got, ok := set.namespaces.Load(name); ok && (got == want || got == "cluster") {
		return nil
	}
	set.namespaceMu.Lock()
	defer set.namespaceMu.Unlock()
	got, known := set.namespaces.Load(name)
	switch {
	case known && (got == want || got == "cluster"):
		return nil
	case live == nil && known:
		// Recorded from the live source before; keep it.
		return nil
	case live != nil && known && newer(got.(string), want):
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
	switch {
	case live != nil:
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: live.Labels, Annotations: live.Annotations}}
	case set.chain.HasNamespace(ctx, name):
		set.namespaces.Store(name, "cluster")
		return nil
	default:
		h.log.Info("namespace not described by --cluster; assuming only the kubernetes.io/metadata.name label", "namespace", name)
	}
	if err := set.chain.PutNamespace(ctx, ns); err != nil {
		return err
	}
	set.namespaces.Store(name, want)
	return nil
}

// newer reports whether the recorded "live@RV" is at least as new as want.
func newer(recorded, want string) bool {
	r, okR := strings.CutPrefix(recorded, "live@")
	w, okW := strings.CutPrefix(want, "live@")
	if !okR || !okW {
		return false
	}
	ri, errR := strconv.ParseUint(r, 10, 64)
	wi, errW := strconv.ParseUint(w, 10, 64)
	return errR == nil && errW == nil && ri >= wi
}
