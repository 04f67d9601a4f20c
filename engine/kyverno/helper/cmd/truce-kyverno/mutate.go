package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	bgmpol "github.com/kyverno/kyverno/pkg/background/mpol"
	"github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	mpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/mpol/compiler"
	mpolengine "github.com/kyverno/kyverno/pkg/cel/policies/mpol/engine"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	"github.com/kyverno/kyverno/pkg/event"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
)

func mpolKey(p policiesv1beta1.MutatingPolicyLike) string {
	if p.GetNamespace() != "" {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// mutateExistingRule describes a MutatingPolicy that mutates existing
// objects: its triggers (matchConstraints) and targets
// (targetMatchConstraints, else matchConstraints).
func mutateExistingRule(p policiesv1beta1.MutatingPolicyLike, resources []*metav1.APIResourceList) protocol.BackgroundRule {
	r := protocol.BackgroundRule{Policy: mpolKey(p), CEL: true, Kinds: constraintKinds(p.GetMatchConstraints(), resources)}
	r.Targets = r.Kinds
	tmc := p.GetTargetMatchConstraints()
	if len(tmc.ResourceRules) != 0 {
		r.Targets = constraintKinds(tmc.MatchResources, resources)
	}
	var why []string
	for _, v := range p.GetVariables() {
		for _, lib := range []string{"http.", "image(", "imagedata.", "globalContext."} {
			if strings.Contains(v.Expression, lib) {
				why = append(why, fmt.Sprintf("variable %q uses %s, which reaches outside the cluster", v.Name, strings.TrimRight(lib, ".(")))
			}
		}
	}
	r.Unpredictable = strings.Join(why, "; ")
	return r
}

// runMutateExisting answers OpMutateExisting: the MutatingPolicies that
// mutate existing objects (and the ClusterPolicies and Policies with
// mutate.targets, mutate_targets.go), and, for a trigger, the updates Kyverno makes
// for it. As Kyverno's MutatingPolicy admission handler does, the engine
// says which mutate-existing policies the trigger's admission matches
// (MatchedMutateExistingPolicies); for each, an UpdateRequest of type
// CELMutate goes through Kyverno's own background processor
// (pkg/background/mpol), which lists the targets in the fake cluster and
// updates them there.
func runMutateExisting(ctx context.Context, req *protocol.BackgroundRequest) (*protocol.BackgroundResponse, error) {
	d, err := decodeObjects(req.Policies)
	if err != nil {
		return nil, err
	}
	cel := sortCEL(d.kyverno)
	resp := &protocol.BackgroundResponse{}
	// ClusterPolicies and Policies with mutate.targets: Kyverno's older
	// mutate-existing controller (mutate_targets.go).
	legacy := mutateTargetPolicies(d.kyverno)
	for _, p := range legacy {
		resp.Rules = append(resp.Rules, mutateTargetRules(p)...)
	}
	for _, p := range legacy {
		if len(req.Trigger) > 0 && policyKey(p) == req.Policy {
			if err := runMutateTargets(ctx, req, p, resp); err != nil {
				return nil, err
			}
			return resp, nil
		}
	}
	var mpols []policiesv1beta1.MutatingPolicyLike
	var objs []runtime.Object
	for _, p := range cel.mpols {
		if !p.GetSpec().MutateExistingEnabled() {
			continue
		}
		mpols = append(mpols, p)
		objs = append(objs, p)
		resp.Rules = append(resp.Rules, mutateExistingRule(p, req.Resources))
	}
	if len(req.Trigger) == 0 || len(mpols) == 0 {
		return resp, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fc, err := newFakeCluster(ctx, req)
	if err != nil {
		return nil, err
	}
	configuration, err := defaultConfiguration()
	if err != nil {
		return nil, err
	}
	// Kyverno's resource filters (kube-system, Events, its own objects…)
	// keep such a trigger from ever reaching its webhook, so no
	// UpdateRequest is made for it.
	if t := fc.trigger; configuration.ToFilter(t.GroupVersionKind(), "", t.GetNamespace(), t.GetName()) {
		return resp, nil
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(fc.kube.Discovery()))
	informers := kubeinformers.NewSharedInformerFactory(fc.kube, 0)
	nsLister := informers.Core().V1().Namespaces().Lister()
	secretLister := informers.Core().V1().Secrets().Lister()
	informers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	contextProvider, err := libs.NewContextProvider(fc.client, secretLister, offlineGlobalContext{}, restMapper, false)
	if err != nil {
		return nil, fmt.Errorf("kyverno's CEL context: %w", err)
	}
	provider, err := mpolengine.NewProvider(mpolcompiler.NewCompiler(), mpols, nil, contextProvider)
	if err != nil {
		return nil, err
	}
	nsResolver := engine.NewNamespaceResolver(logr.Discard(), nsLister, fc.kube)
	mpolEngine := mpolengine.NewEngine(provider, nsResolver, matching.NewMatcher(), mpolcompiler.NewStaticTypeConverterManager(openAPIDocs(req.OpenAPI)), contextProvider)
	kyvernoClient := kyvernofake.NewSimpleClientset(objs...) //lint:ignore SA1019 the only constructor Kyverno generates

	trigger := fc.trigger
	gvk := trigger.GroupVersionKind()
	mapping, err := restMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("the trigger's kind %s: %w", gvk, err)
	}
	request := engine.Request(contextProvider, gvk, mapping.Resource, "", trigger.GetName(), trigger.GetNamespace(),
		admissionv1.Operation(req.Operation), authenticationv1.UserInfo{}, trigger, nil, false, nil)
	status := &urStatus{}
	processor := bgmpol.NewProcessor(fc.client, kyvernoClient, mpolEngine, restMapper, contextProvider, status, event.NewFake(), configuration)
	matched := mpolEngine.MatchedMutateExistingPolicies(ctx, request)
	for _, name := range matched {
		if req.Policy != "" && name != req.Policy {
			continue
		}
		// The UpdateRequest carries the admission request as the webhook
		// received it: the object as raw JSON.
		ar := request.Request
		ar.Object = runtime.RawExtension{Raw: req.Trigger}
		ar.OldObject = runtime.RawExtension{}
		ur := &kyvernov2.UpdateRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "truce-" + name, Namespace: "kyverno"},
			Spec: kyvernov2.UpdateRequestSpec{
				Type:   kyvernov2.CELMutate,
				Policy: name,
				Context: kyvernov2.UpdateRequestSpecContext{
					AdmissionRequestInfo: kyvernov2.AdmissionRequestInfoObject{AdmissionRequest: &ar, Operation: ar.Operation},
				},
			},
		}
		if err := processor.Process(ur); err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", name, err))
		}
	}
	resp.Errors = append(resp.Errors, status.failed...)
	if err := fc.readBack(ctx, nil, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// urStatus records what Kyverno's processor says of an UpdateRequest: the
// helper has no UpdateRequests to update.
type urStatus struct{ failed []string }

func (s *urStatus) Failed(name, message string, _ []kyvernov1.ResourceSpec) (*kyvernov2.UpdateRequest, error) {
	s.failed = append(s.failed, strings.TrimPrefix(name, "truce-")+": "+message)
	return nil, nil
}

func (s *urStatus) Success(string, []kyvernov1.ResourceSpec) (*kyvernov2.UpdateRequest, error) {
	return nil, nil
}

func (s *urStatus) Skip(string, []kyvernov1.ResourceSpec) (*kyvernov2.UpdateRequest, error) {
	return nil, nil
}
