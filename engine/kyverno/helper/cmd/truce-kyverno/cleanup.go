package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	kyvernov2informers "github.com/kyverno/kyverno/pkg/client/informers/externalversions/kyverno/v2"
	kyvernov2listers "github.com/kyverno/kyverno/pkg/client/listers/kyverno/v2"
	"github.com/kyverno/kyverno/pkg/controllers/cleanup"
	"github.com/kyverno/kyverno/pkg/engine/context/resolvers"
	"github.com/kyverno/kyverno/pkg/engine/jmespath"
	"github.com/kyverno/kyverno/pkg/event"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8ssets "k8s.io/apimachinery/pkg/util/sets"
	kubeinformers "k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
)

// cleanupKey names a ClusterCleanupPolicy ("name") or a CleanupPolicy
// ("namespace/name").
func cleanupKey(p kyvernov2.CleanupPolicyInterface) string {
	if p.GetNamespace() != "" {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// clusterResources are the cluster-scoped kinds of the cluster's
// discovery, "Kind" and "group/version/Kind", as Kyverno's cleanup policy
// validation (FetchClusteredResources) reads them.
func clusterResources(resources []*metav1.APIResourceList) k8ssets.Set[string] {
	out := k8ssets.New[string]()
	for _, l := range resources {
		for _, r := range l.APIResources {
			if !r.Namespaced && !strings.Contains(r.Name, "/") {
				out.Insert(l.GroupVersion+"/"+r.Kind, r.Kind)
			}
		}
	}
	return out
}

// wallClockJMESPath are the JMESPath functions of Kyverno that read the
// wall clock: time_now and time_now_utc always, time_since when its end
// is empty (the usual way to compute an age).
var wallClockJMESPath = regexp.MustCompile(`\btime_(now|now_utc|since)\s*\(`)

// cleanupRule describes a ClusterCleanupPolicy or CleanupPolicy: the
// kinds of its match block (what the controller lists), its schedule, and
// what makes it unpredictable: context entries truce cannot give the
// controller offline, and conditions or context that read the wall clock
// (an age: which objects go depends on when the schedule comes).
func cleanupRule(p kyvernov2.CleanupPolicyInterface) protocol.BackgroundRule {
	spec := p.GetSpec()
	r := protocol.BackgroundRule{Policy: cleanupKey(p), PolicyKind: p.GetKind(), Schedule: spec.Schedule, Kinds: spec.MatchResources.GetKinds()}
	why := contextReasons(spec.Context, "the cleanup controller")
	parts := []struct {
		what string
		v    any
	}{{"its context uses", spec.Context}, {"its conditions use", spec.Conditions}}
	for _, part := range parts {
		raw, err := json.Marshal(part.v)
		if err != nil {
			continue
		}
		if m := wallClockJMESPath.FindAllStringSubmatch(string(raw), -1); len(m) > 0 {
			why = append(why, fmt.Sprintf("%s %s, which Kyverno reads from the wall clock, not the simulation's: which objects it deletes depends on when it runs", part.what, wallClockFunctions(m)))
		}
	}
	r.Unpredictable = strings.Join(why, "; ")
	return r
}

func wallClockFunctions(matches [][]string) string {
	seen := map[string]bool{}
	var out []string
	for _, m := range matches {
		f := "time_" + m[1]
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// runCleanupController runs Kyverno's cleanup controller
// (pkg/controllers/cleanup), wired as the cleanup controller's main wires
// it, until it has processed policy once: until it records the execution
// in the policy's status (it deletes first), or takes the policy up again
// (the first attempt failed: Kyverno retries it, and the retries find what
// the first found). As for DeletingPolicies, the policy is made due at
// once (created long ago, never executed); truce decides when.
func runCleanupController(ctx context.Context, fc *fakeCluster, policy kyvernov2.CleanupPolicyInterface) error {
	due := policy.(runtime.Object).DeepCopyObject().(kyvernov2.CleanupPolicyInterface)
	due.SetCreationTimestamp(dueAt)
	*due.GetStatus() = kyvernov2.CleanupPolicyStatus{}
	at, err := due.GetExecutionTime()
	if err != nil {
		return fmt.Errorf("schedule %q: %w", due.GetSpec().Schedule, err)
	}
	if at.After(time.Now()) {
		return fmt.Errorf("schedule %q is not due before %s", due.GetSpec().Schedule, at)
	}

	ctx, cancel := context.WithTimeout(ctx, deletingRunLimit)
	defer cancel()
	configuration, err := defaultConfiguration()
	if err != nil {
		return err
	}
	kyvernoClient := kyvernofake.NewSimpleClientset(due.(runtime.Object)) //lint:ignore SA1019 the only constructor Kyverno generates
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	for _, resource := range []string{"clustercleanuppolicies", "cleanuppolicies"} {
		kyvernoClient.PrependReactor("update", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "status" {
				// The controller records the execution after deleting.
				defer finish()
			}
			return false, nil, nil
		})
	}
	kyvernoInformers := kyvernoinformers.NewSharedInformerFactory(kyvernoClient, 0)
	attempts := &cleanupAttempts{retried: finish}
	cpols := &cleanupInformer{ClusterCleanupPolicyInformer: kyvernoInformers.Kyverno().V2().ClusterCleanupPolicies(), a: attempts}
	pols := &namespacedCleanupInformer{CleanupPolicyInformer: kyvernoInformers.Kyverno().V2().CleanupPolicies(), a: attempts}
	kubeInformers := kubeinformers.NewSharedInformerFactory(fc.kube, 0)
	nsLister := kubeInformers.Core().V1().Namespaces().Lister()
	cmResolver, err := resolvers.NewClientBasedResolver(fc.kube)
	if err != nil {
		return err
	}
	controller := cleanup.NewController(fc.client, kyvernoClient, cpols, pols, nsLister, configuration, cmResolver, jmespath.New(configuration), event.NewFake(), offlineGlobalContext{})
	kyvernoInformers.Start(ctx.Done())
	kubeInformers.Start(ctx.Done())
	kyvernoInformers.WaitForCacheSync(ctx.Done())
	kubeInformers.WaitForCacheSync(ctx.Done())
	return runOnce(ctx, "cleanup", controller.Run, done, attempts.failed)
}

// cleanupAttempts counts the cleanup controller's reconciliations (each
// starts by getting the policy from its lister): a second one means the
// first failed.
type cleanupAttempts struct {
	mu      sync.Mutex
	n       int
	retried func()
}

func (a *cleanupAttempts) get() error {
	a.mu.Lock()
	a.n++
	again := a.n > 1
	a.mu.Unlock()
	if again {
		a.retried()
		return errors.New("truce: one attempt is enough")
	}
	return nil
}

func (a *cleanupAttempts) failed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n > 1
}

// cleanupInformer and namespacedCleanupInformer hand the controller
// listers that count its attempts.
type cleanupInformer struct {
	kyvernov2informers.ClusterCleanupPolicyInformer
	a *cleanupAttempts
}

func (i *cleanupInformer) Lister() kyvernov2listers.ClusterCleanupPolicyLister {
	return &cleanupLister{ClusterCleanupPolicyLister: i.ClusterCleanupPolicyInformer.Lister(), a: i.a}
}

type cleanupLister struct {
	kyvernov2listers.ClusterCleanupPolicyLister
	a *cleanupAttempts
}

func (l *cleanupLister) Get(name string) (*kyvernov2.ClusterCleanupPolicy, error) {
	if err := l.a.get(); err != nil {
		return nil, err
	}
	return l.ClusterCleanupPolicyLister.Get(name)
}

type namespacedCleanupInformer struct {
	kyvernov2informers.CleanupPolicyInformer
	a *cleanupAttempts
}

func (i *namespacedCleanupInformer) Lister() kyvernov2listers.CleanupPolicyLister {
	return &namespacedCleanupLister{CleanupPolicyLister: i.CleanupPolicyInformer.Lister(), a: i.a}
}

type namespacedCleanupLister struct {
	kyvernov2listers.CleanupPolicyLister
	a *cleanupAttempts
}

func (l *namespacedCleanupLister) CleanupPolicies(namespace string) kyvernov2listers.CleanupPolicyNamespaceLister {
	return &cleanupNamespaceLister{CleanupPolicyNamespaceLister: l.CleanupPolicyLister.CleanupPolicies(namespace), a: l.a}
}

type cleanupNamespaceLister struct {
	kyvernov2listers.CleanupPolicyNamespaceLister
	a *cleanupAttempts
}

func (l *cleanupNamespaceLister) Get(name string) (*kyvernov2.CleanupPolicy, error) {
	if err := l.a.get(); err != nil {
		return nil, err
	}
	return l.CleanupPolicyNamespaceLister.Get(name)
}
