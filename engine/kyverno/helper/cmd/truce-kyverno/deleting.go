package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	celengine "github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	dpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/dpol/compiler"
	dpolengine "github.com/kyverno/kyverno/pkg/cel/policies/dpol/engine"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/controllers/deleting"
	"github.com/kyverno/kyverno/pkg/event"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
	clienttesting "k8s.io/client-go/testing"
)

// deletingRunLimit bounds one run of Kyverno's deleting controller: it
// acts at once on a policy that is due, so only a controller that never
// picks the policy up (which would be a bug here) reaches it.
const deletingRunLimit = time.Minute

func dpolKey(p policiesv1beta1.DeletingPolicyLike) string {
	if p.GetNamespace() != "" {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// deletingRule describes a DeletingPolicy: the kinds of its
// matchConstraints (what it may delete) and its schedule. What its CEL
// reads from outside the cluster, or from the wall clock, makes it
// unpredictable.
func deletingRule(p policiesv1beta1.DeletingPolicyLike, resources []*metav1.APIResourceList) protocol.BackgroundRule {
	spec := p.GetDeletingPolicySpec()
	r := protocol.BackgroundRule{Policy: dpolKey(p), PolicyKind: p.GetKind(), CEL: true, Schedule: spec.Schedule}
	if spec.MatchConstraints != nil {
		r.Kinds = constraintKinds(*spec.MatchConstraints, resources)
	}
	type expr struct{ what, name, expression string }
	var exprs []expr
	for _, v := range spec.Variables {
		exprs = append(exprs, expr{"variable", v.Name, v.Expression})
	}
	for _, c := range spec.Conditions {
		exprs = append(exprs, expr{"condition", c.Name, c.Expression})
	}
	var why []string
	for _, e := range exprs {
		for _, lib := range []string{"http.", "image(", "imagedata.", "globalContext."} {
			if strings.Contains(e.expression, lib) {
				why = append(why, fmt.Sprintf("%s %q uses %s, which reaches outside the cluster", e.what, e.name, strings.TrimRight(lib, ".(")))
			}
		}
		if wallClockCEL.MatchString(e.expression) {
			why = append(why, fmt.Sprintf("%s %q uses time.now(), which Kyverno reads from the wall clock, not the simulation's: which objects it deletes depends on when it runs", e.what, e.name))
		}
	}
	r.Unpredictable = strings.Join(why, "; ")
	return r
}

// wallClockCEL is a call of the time library's time.now() (Kyverno's CEL
// has no other clock), with the spaces CEL allows.
var wallClockCEL = regexp.MustCompile(`\btime\s*\.\s*now\s*\(`)

// runDeleting answers OpDeleting: the DeletingPolicies, and, for one of
// them (req.Policy), what Kyverno's deleting controller
// (pkg/controllers/deleting, the cleanup controller's) deletes when the
// policy's schedule comes: the controller runs against a fake cluster
// holding the objects truce sent, picks the policy up from its informer
// as it does in the cluster, lists what matchConstraints name, asks the
// dpol engine about each object and deletes the matches. truce decides
// when the schedule comes; the policy is made due at once here (created
// long ago, never executed).
func runDeleting(ctx context.Context, req *protocol.BackgroundRequest) (*protocol.BackgroundResponse, error) {
	d, err := decodeObjects(req.Policies)
	if err != nil {
		return nil, err
	}
	resp := &protocol.BackgroundResponse{}
	var policy policiesv1beta1.DeletingPolicyLike
	var cleanupPolicy kyvernov2.CleanupPolicyInterface
	var exceptions []runtime.Object
	compiler := dpolcompiler.NewCompiler()
	clustered := clusterResources(req.Resources)
	// A request from a truce of version 6 names no kind: a DeletingPolicy.
	wantKind := func(kind string) bool {
		return req.PolicyKind == kind || (req.PolicyKind == "" && (kind == "DeletingPolicy" || kind == "NamespacedDeletingPolicy"))
	}
	for _, o := range d.kyverno {
		switch p := o.(type) {
		case *policiesv1beta1.PolicyException:
			exceptions = append(exceptions, p)
		case policiesv1beta1.DeletingPolicyLike:
			if _, errs := compiler.Compile(p, nil); len(errs) > 0 {
				// Kyverno's controller fails such a policy each time it
				// comes: it deletes nothing.
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s %s: %v", p.GetKind(), dpolKey(p), errs.ToAggregate()))
				continue
			}
			resp.Rules = append(resp.Rules, deletingRule(p, req.Resources))
			if req.Policy == dpolKey(p) && wantKind(p.GetKind()) {
				policy = p
			}
		case kyvernov2.CleanupPolicyInterface:
			// Kyverno's validating webhook refuses such a policy (its
			// structural checks; the permission checks need the
			// cluster's RBAC for Kyverno's service account).
			if errs := p.Validate(clustered); len(errs) > 0 {
				resp.Errors = append(resp.Errors, fmt.Sprintf("%s %s: %v", p.GetKind(), cleanupKey(p), errs.ToAggregate()))
				continue
			}
			resp.Rules = append(resp.Rules, cleanupRule(p))
			if req.Policy == cleanupKey(p) && wantKind(p.GetKind()) {
				cleanupPolicy = p
			}
		}
	}
	if req.Policy == "" {
		return resp, nil
	}
	if policy == nil && cleanupPolicy == nil {
		kind := req.PolicyKind
		if kind == "" {
			kind = "DeletingPolicy"
		}
		return nil, fmt.Errorf("no %s %s among the policies sent", kind, req.Policy)
	}
	fc, err := newFakeCluster(ctx, req)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		if err := runDeletingController(ctx, fc, policy, exceptions); err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s %s: %v", policy.GetKind(), dpolKey(policy), err))
		}
	} else if err := runCleanupController(ctx, fc, cleanupPolicy); err != nil {
		resp.Errors = append(resp.Errors, fmt.Sprintf("%s %s: %v", cleanupPolicy.GetKind(), cleanupKey(cleanupPolicy), err))
	}
	if err := fc.readDeleted(ctx, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// dueAt is when the helper makes a policy due: long before any schedule
// truce simulates. Kyverno computes a policy's execution time from its
// status.lastExecutionTime, else its creationTimestamp.
var dueAt = metav1.NewTime(time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC))

// runDeletingController runs Kyverno's deleting controller, wired as the
// cleanup controller's main wires it, until it has processed policy once:
// until it records the execution in the policy's status (it deletes
// first), or takes the policy up again (the first attempt failed: Kyverno
// retries it, and the retries find what the first found).
func runDeletingController(ctx context.Context, fc *fakeCluster, policy policiesv1beta1.DeletingPolicyLike, exceptions []runtime.Object) error {
	due := policy.DeepCopyObject().(policiesv1beta1.DeletingPolicyLike)
	due.SetCreationTimestamp(dueAt)
	switch p := due.(type) {
	case *policiesv1beta1.DeletingPolicy:
		p.Status = policiesv1beta1.DeletingPolicyStatus{}
	case *policiesv1beta1.NamespacedDeletingPolicy:
		p.Status = policiesv1beta1.DeletingPolicyStatus{}
	}
	at, err := due.GetExecutionTime()
	if err != nil {
		return fmt.Errorf("schedule %q: %w", due.GetDeletingPolicySpec().Schedule, err)
	}
	if at.After(time.Now()) {
		// Kyverno would wait for it: truce asked too early.
		return fmt.Errorf("schedule %q is not due before %s", due.GetDeletingPolicySpec().Schedule, at)
	}

	ctx, cancel := context.WithTimeout(ctx, deletingRunLimit)
	defer cancel()
	configuration, err := defaultConfiguration()
	if err != nil {
		return err
	}
	kyvernoClient := kyvernofake.NewSimpleClientset(append(exceptions, due)...) //lint:ignore SA1019 the only constructor Kyverno generates
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	for _, resource := range []string{"deletingpolicies", "namespaceddeletingpolicies"} {
		kyvernoClient.PrependReactor("update", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "status" {
				// The controller records the execution after deleting.
				defer finish()
			}
			return false, nil, nil
		})
	}
	kyvernoInformers := kyvernoinformers.NewSharedInformerFactory(kyvernoClient, 0)
	dpols := kyvernoInformers.Policies().V1beta1().DeletingPolicies()
	ndpols := kyvernoInformers.Policies().V1beta1().NamespacedDeletingPolicies()
	polexLister := kyvernoInformers.Policies().V1beta1().PolicyExceptions().Lister()
	kubeInformers := kubeinformers.NewSharedInformerFactory(fc.kube, 0)
	nsLister := kubeInformers.Core().V1().Namespaces().Lister()
	secretLister := kubeInformers.Core().V1().Secrets().Lister()

	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(fc.kube.Discovery()))
	libCtx, err := libs.NewContextProvider(fc.client, secretLister, offlineGlobalContext{}, restMapper, false)
	if err != nil {
		return fmt.Errorf("kyverno's CEL context: %w", err)
	}
	// Exceptions on, as everywhere in truce: a repository that carries
	// them has turned them on.
	provider := &attempts{Provider: dpolengine.NewFetchProvider(dpolcompiler.NewCompiler(), dpols.Lister(), ndpols.Lister(), celengine.NewPolicyExceptionLister(polexLister, "*"), true), retried: finish}
	eng := dpolengine.NewEngine(celengine.NewNamespaceResolver(logr.Discard(), nsLister, fc.kube), restMapper, libCtx, matching.NewMatcher())
	controller := deleting.NewController(fc.client, kyvernoClient, dpols, ndpols, provider, eng, nsLister, configuration, nil, event.NewFake())
	kyvernoInformers.Start(ctx.Done())
	kubeInformers.Start(ctx.Done())
	kyvernoInformers.WaitForCacheSync(ctx.Done())
	kubeInformers.WaitForCacheSync(ctx.Done())
	return runOnce(ctx, "deleting", controller.Run, done, provider.failed)
}

// attempts counts the controller's reconciliations of the policy (each
// starts by getting it): a second one means the first failed.
type attempts struct {
	dpolengine.Provider
	mu      sync.Mutex
	n       int
	retried func()
}

func (a *attempts) Get(ctx context.Context, namespace, name string) (dpolengine.Policy, error) {
	a.mu.Lock()
	a.n++
	again := a.n > 1
	a.mu.Unlock()
	if again {
		a.retried()
		return dpolengine.Policy{}, errors.New("truce: one attempt is enough")
	}
	return a.Provider.Get(ctx, namespace, name)
}

func (a *attempts) failed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n > 1
}

// readDeleted adds to resp a delete for each object sent that the fake
// cluster no longer holds.
func (fc *fakeCluster) readDeleted(ctx context.Context, resp *protocol.BackgroundResponse) error {
	for _, gvk := range sortedKinds(fc.sent) {
		for _, k := range sortedPairs(fc.sent[gvk]) {
			_, err := fc.client.GetResource(ctx, gvk.GroupVersion().String(), gvk.Kind, k[0], k[1])
			switch {
			case apierrors.IsNotFound(err):
				if err := appendWrite(resp, "delete", fc.sent[gvk][k]); err != nil {
					return err
				}
			case err != nil:
				return fmt.Errorf("reading back %s %s/%s: %w", gvk.Kind, k[0], k[1], err)
			}
		}
	}
	return nil
}

func sortedKinds[V any](m map[schema.GroupVersionKind]V) []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// sortedPairs are the keys of m in order.
func sortedPairs[V any](m map[[2]string]V) [][2]string {
	out := make([][2]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+"/"+out[i][1] < out[j][0]+"/"+out[j][1] })
	return out
}

// runOnce runs a Kyverno background controller with one worker until it
// has processed the policy (done), or ctx ends, and says whether its
// first attempt failed (a retry).
func runOnce(ctx context.Context, name string, run func(context.Context, int), done <-chan struct{}, failed func() bool) error {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { run(runCtx, 1) })
	defer wg.Wait()
	defer stop()
	select {
	case <-done:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("kyverno's %s controller did not process the policy within %s", name, deletingRunLimit)
		}
		return ctx.Err()
	}
	if failed() {
		return fmt.Errorf("kyverno's %s controller failed on it and retries it (TRUCE_KYVERNO_LOG=1 shows why)", name)
	}
	return nil
}
