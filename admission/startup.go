package admission

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// startInformers starts the factory's informers not started yet and waits
// until every started one has synced (client-go waits for that without
// polling); it returns the started informers' types.
func startInformers(ctx, runCtx context.Context, factory informers.SharedInformerFactory) (map[reflect.Type]bool, error) {
	factory.Start(runCtx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	for typ, ok := range synced {
		if !ok {
			return nil, fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	return synced, nil
}

// preparePolicyInformers creates the informers the enabled policy plugins
// ask the factory for in ValidateInitialization (their policies, bindings
// and namespaces), so that they can be started before.
func preparePolicyInformers(factory informers.SharedInformerFactory, names []string) {
	v1 := factory.Admissionregistration().V1()
	if slices.Contains(names, validating.PluginName) {
		v1.ValidatingAdmissionPolicies().Informer()
		v1.ValidatingAdmissionPolicyBindings().Informer()
		factory.Core().V1().Namespaces().Informer()
	}
	if slices.Contains(names, mutating.PluginName) {
		v1.MutatingAdmissionPolicies().Informer()
		v1.MutatingAdmissionPolicyBindings().Informer()
		factory.Core().V1().Namespaces().Informer()
	}
}

// policySources tells when the policy plugins' sources have compiled their
// policies. Upstream's source only says so through HasSynced, which the
// plugin's WaitForReady polls every 100 ms; right after storing the
// compiled policies, though, its Run adds its event handlers to the
// binding informer it was given. The plugins truce builds (policycompile.go)
// give it a bindingInformer that reports that call.
type policySources struct {
	mu   sync.Mutex
	done []<-chan struct{}
}

// informer wraps the binding informer of one policy source.
func (s *policySources) informer(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	if s == nil {
		return inf
	}
	b := &bindingInformer{SharedIndexInformer: inf, done: make(chan struct{})}
	s.mu.Lock()
	s.done = append(s.done, b.done)
	s.mu.Unlock()
	return b
}

// wait returns once every source has compiled its policies, or ctx ends,
// or after readyTimeout (the plugins' WaitForReady, which the chain asks
// next, then says why).
func (s *policySources) wait(ctx context.Context) error {
	s.mu.Lock()
	done := slices.Clone(s.done)
	s.mu.Unlock()
	timeout := time.NewTimer(readyTimeout)
	defer timeout.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-timeout.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for admission policies to compile: %w", ctx.Err())
		}
	}
	return nil
}

// readyTimeout is how long upstream's WaitForReady waits for a plugin.
const readyTimeout = 10 * time.Second

// bindingInformer closes done when the policy source adds its event
// handlers, which it does once its first compilation is stored.
type bindingInformer struct {
	cache.SharedIndexInformer
	once sync.Once
	done chan struct{}
}

func (b *bindingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := b.SharedIndexInformer.AddEventHandler(h)
	b.once.Do(func() { close(b.done) })
	return reg, err
}
