package admission

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/truce-dev/truce/schema"
)

// The plugins read the cluster through a fake clientset and a fake dynamic
// client built from the state (their informers list and watch them). A
// mirror writes every committed object into both, as the server's storage
// would, so that a write only needs a new chain when it changes what the
// chain compiled from the state: policies, bindings, webhook
// configurations, CRDs, params and the plugins' caches (see rebuildKinds).
// The next admission waits until the informers have every mirrored write,
// so it sees what a chain built afresh from the state would see.

// mirroredKinds are configuration kinds the plugins only read through
// their informers and clients, with no cache that outlives a change
// (NamespaceLifecycle, PodSecurity, the policy and webhook matchers,
// ServiceAccount, the RBAC authorizer): their writes are mirrored instead
// of rebuilding the chain. Their deletes still rebuild (a Namespace's takes
// its contents along; NamespaceLifecycle caches deletions).
var mirroredKinds = sets.New(
	k8sschema.GroupKind{Kind: "Namespace"},
	k8sschema.GroupKind{Kind: "ServiceAccount"},
	k8sschema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"},
	k8sschema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
	k8sschema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
	k8sschema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"},
)

// maxPending bounds the mirrored writes not yet waited for: a fake watch
// holds 100 events before it panics, so past this a commit rebuilds
// instead.
const maxPending = 32

type mirror struct {
	registry *schema.Registry
	typed    *fake.Clientset
	dynamic  *dynamicfake.FakeDynamicClient

	mu sync.Mutex
	// informers are the started informers of the plugins' factory, by the
	// kind they hold.
	informers map[k8sschema.GroupVersionKind]cache.SharedIndexInformer
	// handlers are the mirror's registrations on those informers.
	handlers []cache.ResourceEventHandlerRegistration
	// changed is closed, and replaced, whenever an informer's store changes.
	changed chan struct{}
	// pending are the mirrored writes not yet known to be in the
	// informers; settled counts those dropped from its front, so that a
	// caller drops exactly the writes it waited for, however many other
	// callers settle at the same time (Chain.Admit has concurrent callers).
	pending []pendingWrite
	settled int
}

// pendingWrite is a mirrored write the informers of its kind may not have
// seen yet.
type pendingWrite struct {
	gvk    k8sschema.GroupVersionKind
	key    string
	object runtime.Object // nil for a delete
	rv     string
}

func newMirror(reg *schema.Registry, typed *fake.Clientset, dynamic *dynamicfake.FakeDynamicClient) *mirror {
	return &mirror{registry: reg, typed: typed, dynamic: dynamic, changed: make(chan struct{}),
		informers: map[k8sschema.GroupVersionKind]cache.SharedIndexInformer{}}
}

// watch learns the factory's started informers and is told of every change
// of their stores (after the store has it: shared informers update their
// indexer before notifying handlers).
func (m *mirror) watch(factory informers.SharedInformerFactory, started map[reflect.Type]bool) error {
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { m.notify() },
		UpdateFunc: func(any, any) { m.notify() },
		DeleteFunc: func(any) { m.notify() },
	}
	for typ := range started {
		if typ.Kind() != reflect.Pointer {
			continue
		}
		obj, ok := reflect.New(typ.Elem()).Interface().(runtime.Object)
		if !ok {
			continue
		}
		gvks, _, err := clientTypes().ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			continue
		}
		inf := factory.InformerFor(obj, nil)
		reg, err := inf.AddEventHandler(notify)
		if err != nil {
			return fmt.Errorf("watching the admission plugins' %s informer: %w", gvks[0].Kind, err)
		}
		m.mu.Lock()
		for _, gvk := range gvks {
			m.informers[gvk] = inf
		}
		m.handlers = append(m.handlers, reg)
		m.mu.Unlock()
	}
	return nil
}

// delivered returns once every informer has handed its stored objects to
// the mirror's handler. The plugins' own handlers (the webhook
// configuration managers', the policy sources') were added before and are
// handed the same objects first, almost always finishing first too: the
// plugins' readiness, which upstream polls every 100 ms, then holds at the
// first look. It is a hint only: readiness is still the plugins' to say.
func (m *mirror) delivered(ctx context.Context) error {
	m.mu.Lock()
	handlers := slices.Clone(m.handlers)
	m.mu.Unlock()
	for _, h := range handlers {
		select {
		case <-h.HasSyncedChecker().Done():
		case <-ctx.Done():
			return fmt.Errorf("waiting for the admission plugins' informers: %w", ctx.Err())
		}
	}
	return nil
}

func (m *mirror) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// waitUntil returns once cond holds, checking it again after every change
// of an informer's store; it gives up when ctx ends.
func (m *mirror) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		m.mu.Lock()
		changed := m.changed
		m.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// settle waits until the informers have every mirrored write. It is safe
// for concurrent callers: each waits for the writes pending when it
// started and drops from the front only those no other caller dropped.
func (m *mirror) settle(ctx context.Context) error {
	m.mu.Lock()
	pending := slices.Clone(m.pending)
	upTo := m.settled + len(pending)
	m.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	err := m.waitUntil(ctx, func() bool {
		for _, p := range pending {
			if !m.seen(p) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the admission plugins' informers to see the cluster's last writes: %w", err)
	}
	m.mu.Lock()
	if drop := upTo - m.settled; drop > 0 {
		m.pending = m.pending[drop:]
		m.settled = upTo
	}
	m.mu.Unlock()
	return nil
}

// seen reports whether the informer of p's kind (if any) holds p.
func (m *mirror) seen(p pendingWrite) bool {
	m.mu.Lock()
	inf, ok := m.informers[p.gvk]
	m.mu.Unlock()
	if !ok {
		return true
	}
	got, exists, err := inf.GetStore().GetByKey(p.key)
	if err != nil {
		return false
	}
	if p.object == nil {
		return !exists
	}
	if !exists {
		return false
	}
	if p.rv != "" {
		acc, err := meta.Accessor(got)
		return err == nil && acc.GetResourceVersion() == p.rv
	}
	return equality.Semantic.DeepEqual(got, p.object)
}

// watched reports whether an informer of the plugins holds objects of gvk.
func (m *mirror) watched(gvk k8sschema.GroupVersionKind) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.informers[gvk]
	return ok
}

// full reports whether a further write must rebuild the chain instead.
func (m *mirror) full() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending) >= maxPending
}

// put stores o (the state's stored form) in both clients, replacing prev
// (the object it replaces, nil when new), exactly as clientObjects puts
// the state into them when a chain is built.
func (m *mirror) put(prev, o *unstructured.Unstructured) error {
	if prev != nil && prev.GroupVersionKind() != o.GroupVersionKind() {
		// Stored in another version before: the clients hold objects by
		// resource and version.
		if err := m.remove(prev); err != nil {
			return err
		}
		prev = nil
	}
	typed, u, err := clientObject(o, m.registry)
	if err != nil {
		return err
	}
	if err := upsert(m.dynamic.Tracker(), u); err != nil {
		return err
	}
	if typed == nil {
		return nil
	}
	if err := upsert(m.typed.Tracker(), typed); err != nil {
		return err
	}
	m.mu.Lock()
	m.pending = append(m.pending, pendingWrite{gvk: u.GroupVersionKind(), key: storeKey(u), object: typed, rv: u.GetResourceVersion()})
	m.mu.Unlock()
	return nil
}

// remove deletes o from both clients.
func (m *mirror) remove(o *unstructured.Unstructured) error {
	typed, u, err := clientObject(o, m.registry)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(u.GroupVersionKind())
	if err := m.dynamic.Tracker().Delete(gvr, u.GetNamespace(), u.GetName()); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if typed == nil {
		return nil
	}
	if err := m.typed.Tracker().Delete(gvr, u.GetNamespace(), u.GetName()); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.mu.Lock()
	m.pending = append(m.pending, pendingWrite{gvk: u.GroupVersionKind(), key: storeKey(u)})
	m.mu.Unlock()
	return nil
}

// upsert creates or replaces obj in a fake client's tracker, under the
// resource the tracker's Add guesses (what the clients were built with).
func upsert(t clienttesting.ObjectTracker, obj runtime.Object) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(obj.GetObjectKind().GroupVersionKind())
	err = t.Update(gvr, obj, acc.GetNamespace())
	if apierrors.IsNotFound(err) {
		err = t.Create(gvr, obj, acc.GetNamespace())
	}
	if err != nil {
		return fmt.Errorf("mirroring %s %s into the admission plugins' client: %w", gvr.Resource, acc.GetName(), err)
	}
	return nil
}

func storeKey(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}
