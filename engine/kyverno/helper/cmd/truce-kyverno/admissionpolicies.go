package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	"github.com/kyverno/kyverno/pkg/admissionpolicy"
	"github.com/kyverno/kyverno/pkg/auth/checker"
	mpolautogen "github.com/kyverno/kyverno/pkg/cel/policies/mpol/autogen"
	vpolautogen "github.com/kyverno/kyverno/pkg/cel/policies/vpol/autogen"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/controllers/admissionpolicygenerator"
	"github.com/kyverno/kyverno/pkg/event"
	"github.com/kyverno/kyverno/pkg/toggle"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubeinformers "k8s.io/client-go/informers"
	admissionregistrationv1informers "k8s.io/client-go/informers/admissionregistration/v1"
	admissionregistrationv1alpha1informers "k8s.io/client-go/informers/admissionregistration/v1alpha1"
	admissionregistrationv1beta1informers "k8s.io/client-go/informers/admissionregistration/v1beta1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// admissionPoliciesMu serialises runs of the generator: it reads Kyverno's
// --generate…AdmissionPolicy flags from process-wide toggles.
var admissionPoliciesMu sync.Mutex

// runAdmissionPolicies runs Kyverno's admission policy generator
// (pkg/controllers/admissionpolicygenerator), wired as cmd/kyverno/main.go
// wires it, against fake clients holding the request's policies, and
// answers what it wrote: the ValidatingAdmissionPolicies,
// MutatingAdmissionPolicies and bindings it created, and the status it
// wrote on each policy (status.generated, which Kyverno's webhook
// controller and engines then read to leave the policy to the API server).
func runAdmissionPolicies(ctx context.Context, req *protocol.AdmissionPoliciesRequest) (*protocol.AdmissionPoliciesResponse, error) {
	admissionPoliciesMu.Lock()
	defer admissionPoliciesMu.Unlock()
	if err := toggle.GenerateValidatingAdmissionPolicy.Parse(strconv.FormatBool(req.GenerateValidatingAdmissionPolicy)); err != nil {
		return nil, err
	}
	if err := toggle.GenerateMutatingAdmissionPolicy.Parse(strconv.FormatBool(req.GenerateMutatingAdmissionPolicy)); err != nil {
		return nil, err
	}
	d, err := decodeObjects(req.Objects)
	if err != nil {
		return nil, err
	}
	for _, o := range d.kyverno {
		if err := withAutogenStatus(o); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	kubeClient := kubefake.NewClientset()
	kubeClient.Discovery().(*fakediscovery.FakeDiscovery).Resources = req.Resources
	kyvernoClient := kyvernofake.NewSimpleClientset(d.kyverno...) //lint:ignore SA1019 the only constructor Kyverno generates
	client, err := dclient.NewClient(ctx, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), kubeClient, time.Hour, false, nil)
	if err != nil {
		return nil, fmt.Errorf("kyverno client: %w", err)
	}

	// As cmd/kyverno/main.go: the generator runs only when the cluster
	// serves ValidatingAdmissionPolicies or MutatingAdmissionPolicies, with
	// informers for the versions it serves (the newest
	// MutatingAdmissionPolicy version), and Kyverno refuses to start with
	// --generateMutatingAdmissionPolicy on a cluster without them.
	vapsRegistered, _ := admissionpolicy.IsValidatingAdmissionPolicyRegistered(kubeClient)
	mapVersion, mapVersionErr := admissionpolicy.PreferredMutatingAdmissionPolicyVersion(kubeClient)
	mapsRegistered := mapVersionErr == nil
	if req.GenerateMutatingAdmissionPolicy && !mapsRegistered {
		return nil, fmt.Errorf("kyverno with --generateMutatingAdmissionPolicy exits: MutatingAdmissionPolicies isn't supported in the API server (%v)", mapVersionErr)
	}
	resp := &protocol.AdmissionPoliciesResponse{}
	if !vapsRegistered && !mapsRegistered {
		return resp, nil
	}
	kubeInformer := kubeinformers.NewSharedInformerFactory(kubeClient, 0)
	kyvernoInformer := kyvernoinformers.NewSharedInformerFactory(kyvernoClient, 0)
	var vapInformer admissionregistrationv1informers.ValidatingAdmissionPolicyInformer
	var vapBindingInformer admissionregistrationv1informers.ValidatingAdmissionPolicyBindingInformer
	var mapV1Informer admissionregistrationv1informers.MutatingAdmissionPolicyInformer
	var mapBindingV1Informer admissionregistrationv1informers.MutatingAdmissionPolicyBindingInformer
	var mapBetaInformer admissionregistrationv1beta1informers.MutatingAdmissionPolicyInformer
	var mapBindingBetaInformer admissionregistrationv1beta1informers.MutatingAdmissionPolicyBindingInformer
	var mapAlphaInformer admissionregistrationv1alpha1informers.MutatingAdmissionPolicyInformer
	var mapBindingAlphaInformer admissionregistrationv1alpha1informers.MutatingAdmissionPolicyBindingInformer
	if vapsRegistered {
		vapInformer = kubeInformer.Admissionregistration().V1().ValidatingAdmissionPolicies()
		vapBindingInformer = kubeInformer.Admissionregistration().V1().ValidatingAdmissionPolicyBindings()
	}
	if mapsRegistered {
		switch mapVersion {
		case admissionpolicy.MutatingAdmissionPolicyVersionV1:
			mapV1Informer = kubeInformer.Admissionregistration().V1().MutatingAdmissionPolicies()
			mapBindingV1Informer = kubeInformer.Admissionregistration().V1().MutatingAdmissionPolicyBindings()
		case admissionpolicy.MutatingAdmissionPolicyVersionV1beta1:
			mapBetaInformer = kubeInformer.Admissionregistration().V1beta1().MutatingAdmissionPolicies()
			mapBindingBetaInformer = kubeInformer.Admissionregistration().V1beta1().MutatingAdmissionPolicyBindings()
		case admissionpolicy.MutatingAdmissionPolicyVersionV1alpha1:
			mapAlphaInformer = kubeInformer.Admissionregistration().V1alpha1().MutatingAdmissionPolicies()
			mapBindingAlphaInformer = kubeInformer.Admissionregistration().V1alpha1().MutatingAdmissionPolicyBindings()
		}
	}

	// The generator ends each policy it acts on by writing its status;
	// those writes say when it is done.
	pending := expectedStatusWrites(d.kyverno, req, mapsRegistered)
	written := make(chan string)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	kyvernoClient.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
			if m, err := meta.Accessor(u.GetObject()); err == nil {
				select {
				case written <- u.GetResource().Resource + "/" + m.GetName():
				case <-runCtx.Done():
				}
			}
		}
		return false, nil, nil
	})

	ctrl := admissionpolicygenerator.NewController(
		kubeClient,
		kyvernoClient,
		client.Discovery(),
		kyvernoInformer.Kyverno().V1().ClusterPolicies(),
		kyvernoInformer.Policies().V1beta1().ValidatingPolicies(),
		kyvernoInformer.Policies().V1beta1().NamespacedValidatingPolicies(),
		kyvernoInformer.Policies().V1beta1().MutatingPolicies(),
		kyvernoInformer.Policies().V1beta1().NamespacedMutatingPolicies(),
		kyvernoInformer.Kyverno().V2().PolicyExceptions(),
		kyvernoInformer.Policies().V1beta1().PolicyExceptions(),
		vapInformer, vapBindingInformer,
		mapV1Informer, mapBindingV1Informer,
		mapBetaInformer, mapBindingBetaInformer,
		mapAlphaInformer, mapBindingAlphaInformer,
		event.NewFake(),
		// The Helm chart's ClusterRole always grants Kyverno these
		// permissions (per-policy generation works with the flags off).
		allowAll{},
	)
	kubeInformer.Start(ctx.Done())
	kyvernoInformer.Start(ctx.Done())
	kubeInformer.WaitForCacheSync(ctx.Done())
	kyvernoInformer.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(runCtx, admissionpolicygenerator.Workers)
	}()
	for len(pending) > 0 {
		select {
		case key := <-written:
			delete(pending, key)
			continue
		case <-ctx.Done():
		}
		break
	}
	stop()
	<-done
	for _, key := range sortedKeys(pending) {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s: Kyverno's admission policy generator did not finish (it retries and gives up on errors): the policy stays with Kyverno's webhook", key))
	}
	if resp.Objects, err = generatedObjects(context.WithoutCancel(ctx), kubeClient); err != nil {
		return nil, err
	}
	resp.Statuses, err = generatorStatuses(context.WithoutCancel(ctx), kyvernoClient)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// withAutogenStatus fills a CEL policy's status.autogen as Kyverno's
// policy status controller writes it (pkg/controllers/policystatus, with
// Kyverno's own autogen): the generator refuses policies whose pod
// controller autogen is on, and reads that from the status.
func withAutogenStatus(o runtime.Object) error {
	switch p := o.(type) {
	case *policiesv1beta1.ValidatingPolicy:
		configs, err := vpolautogen.Autogen(p)
		if err != nil {
			return fmt.Errorf("autogen of ValidatingPolicy %s: %w", p.Name, err)
		}
		p.Status.Autogen.Configs = configs
	case *policiesv1beta1.MutatingPolicy:
		configs, err := mpolautogen.Autogen(p)
		if err != nil {
			return fmt.Errorf("autogen of MutatingPolicy %s: %w", p.Name, err)
		}
		p.Status.Autogen.Configs = configs
	}
	return nil
}

// expectedStatusWrites are the policies whose status the generator's
// reconcile writes (pkg/controllers/admissionpolicygenerator/controller.go,
// reconcile): ClusterPolicies with validate rules and ValidatingPolicies
// when --generateValidatingAdmissionPolicy is on, MutatingPolicies when
// --generateMutatingAdmissionPolicy is on or the policy asks (when the
// cluster serves no MutatingAdmissionPolicy it writes only for those that
// ask). Namespaced policies are never generated. Keys are
// "resource/name" as the status update names them.
func expectedStatusWrites(objs []runtime.Object, req *protocol.AdmissionPoliciesRequest, mapsRegistered bool) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		switch p := o.(type) {
		case *kyvernov1.ClusterPolicy:
			if req.GenerateValidatingAdmissionPolicy && p.GetSpec().HasValidate() {
				out["clusterpolicies/"+p.Name] = true
			}
		case *policiesv1beta1.ValidatingPolicy:
			if req.GenerateValidatingAdmissionPolicy {
				out["validatingpolicies/"+p.Name] = true
			}
		case *policiesv1beta1.MutatingPolicy:
			asks := p.Spec.GenerateMutatingAdmissionPolicyEnabled()
			if (req.GenerateMutatingAdmissionPolicy || asks) && (mapsRegistered || asks) {
				out["mutatingpolicies/"+p.Name] = true
			}
		}
	}
	return out
}

// generatedObjects lists what the generator created, with apiVersion and
// kind set (typed fake clients leave them empty).
func generatedObjects(ctx context.Context, kube *kubefake.Clientset) ([]json.RawMessage, error) {
	var objs []runtime.Object
	ar := kube.AdmissionregistrationV1()
	if l, err := ar.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := ar.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := ar.MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := ar.MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := kube.AdmissionregistrationV1alpha1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	if l, err := kube.AdmissionregistrationV1alpha1().MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	// In a stable order (the fake tracker lists in no particular one), so
	// the same policies give the same answer.
	sort.SliceStable(objs, func(i, j int) bool {
		a, _ := meta.Accessor(objs[i])
		b, _ := meta.Accessor(objs[j])
		return a.GetName() < b.GetName()
	})
	var out []json.RawMessage
	for _, o := range objs {
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		if err != nil || len(gvks) == 0 {
			return nil, fmt.Errorf("kind of a generated %T: %v", o, err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		// The fake tracker's bookkeeping is not what Kyverno wrote.
		m.SetResourceVersion("")
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// generatorStatuses reads back what the generator wrote on each policy.
func generatorStatuses(ctx context.Context, kyverno *kyvernofake.Clientset) ([]protocol.AdmissionPolicyStatus, error) {
	var out []protocol.AdmissionPolicyStatus
	cpols, err := kyverno.KyvernoV1().ClusterPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range cpols.Items {
		s := p.Status.ValidatingAdmissionPolicy
		if s.Generated || s.Message != "" {
			out = append(out, protocol.AdmissionPolicyStatus{Kind: "ClusterPolicy", Name: p.Name, Generated: s.Generated, Message: s.Message})
		}
	}
	vpols, err := kyverno.PoliciesV1beta1().ValidatingPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range vpols.Items {
		if msg := p.Status.ConditionStatus.Message; p.Status.Generated || msg != "" {
			out = append(out, protocol.AdmissionPolicyStatus{Kind: "ValidatingPolicy", Name: p.Name, Generated: p.Status.Generated, Message: msg})
		}
	}
	mpols, err := kyverno.PoliciesV1beta1().MutatingPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range mpols.Items {
		if msg := p.Status.ConditionStatus.Message; p.Status.Generated || msg != "" {
			out = append(out, protocol.AdmissionPolicyStatus{Kind: "MutatingPolicy", Name: p.Name, Generated: p.Status.Generated, Message: msg})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// allowAll is an AuthChecker that allows everything: what the Helm
// chart's ClusterRole grants the admission controller for admission
// policies and their bindings.
type allowAll struct{}

func (allowAll) Check(context.Context, string, string, string, string, string, string, string) (*checker.AuthResult, error) {
	return &checker.AuthResult{Allowed: true}, nil
}
