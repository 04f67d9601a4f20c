package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	"github.com/kyverno/kyverno/pkg/autogen"
	bgmutate "github.com/kyverno/kyverno/pkg/background/mutate"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	"github.com/kyverno/kyverno/pkg/engine/jmespath"
	"github.com/kyverno/kyverno/pkg/event"
	engineutils "github.com/kyverno/kyverno/pkg/utils/engine"
	webhookutils "github.com/kyverno/kyverno/pkg/webhooks/utils"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
)

// mutateTargetPolicies are the ClusterPolicies and Policies among objs
// with a mutate-existing rule (mutate.targets).
func mutateTargetPolicies(objs []runtime.Object) []kyvernov1.PolicyInterface {
	var out []kyvernov1.PolicyInterface
	for _, o := range objs {
		if p, ok := o.(kyvernov1.PolicyInterface); ok && p.GetSpec().HasMutateExisting() {
			out = append(out, p)
		}
	}
	return out
}

// mutateTargetRules describes p's mutate-existing rules as autogen
// computes them: their triggers (match kinds) and targets (the kinds of
// mutate.targets).
func mutateTargetRules(p kyvernov1.PolicyInterface) []protocol.BackgroundRule {
	var out []protocol.BackgroundRule
	for _, rule := range autogen.Default.ComputeRules(p, "") {
		if !rule.HasMutateExisting() {
			continue
		}
		r := protocol.BackgroundRule{Policy: policyKey(p), Rule: rule.Name, Kinds: matchKinds(rule)}
		entries := append([]kyvernov1.ContextEntry(nil), rule.Context...)
		seen := map[string]bool{}
		for _, t := range rule.Mutation.Targets {
			gv, err := schema.ParseGroupVersion(t.APIVersion)
			if err != nil || t.Kind == "" {
				continue
			}
			k := gv.Group + "/" + gv.Version + "/" + t.Kind
			if !seen[k] {
				seen[k] = true
				r.Targets = append(r.Targets, k)
			}
			entries = append(entries, t.Context...)
		}
		why := contextReasons(entries, "the background controller")
		if len(rule.Mutation.ForEachMutation) > 0 {
			for _, f := range rule.Mutation.ForEachMutation {
				why = append(why, contextReasons(f.Context, "the background controller")...)
			}
		}
		r.Unpredictable = strings.Join(why, "; ")
		out = append(out, r)
	}
	return out
}

// runMutateTargets answers OpMutateExisting for a ClusterPolicy or Policy
// rule with mutate.targets and a trigger: as Kyverno's admission handler
// does for the trigger's admission (handleMutateExisting), the engine's
// background checks say which of the policy's rules apply
// (ApplyBackgroundChecks on the policy context built from the admission
// request); each makes an UpdateRequest of type mutate, which Kyverno's
// mutate-existing controller (pkg/background/mutate, ProcessUR) processes
// against the fake cluster: it fetches the targets, mutates them with the
// engine and updates them there.
func runMutateTargets(ctx context.Context, req *protocol.BackgroundRequest, policy kyvernov1.PolicyInterface, resp *protocol.BackgroundResponse) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fc, err := newFakeCluster(ctx, req)
	if err != nil {
		return err
	}
	configuration, err := defaultConfiguration()
	if err != nil {
		return err
	}
	trigger := fc.trigger
	// Kyverno's resource filters keep such a trigger from its webhook.
	if configuration.ToFilter(trigger.GroupVersionKind(), "", trigger.GetNamespace(), trigger.GetName()) {
		return nil
	}
	jp := jmespath.New(configuration)
	eng, err := newEngine(configuration, jp, fc.client, fc.kube, nil)
	if err != nil {
		return err
	}
	kubeInformers := kubeinformers.NewSharedInformerFactory(fc.kube, 0)
	nsLister := kubeInformers.Core().V1().Namespaces().Lister()
	kubeInformers.Start(ctx.Done())
	kubeInformers.WaitForCacheSync(ctx.Done())

	// The admission request kube-apiserver sends Kyverno's webhook.
	gvk := trigger.GroupVersionKind()
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(fc.kube.Discovery()))
	mapping, err := restMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("the trigger's kind %s: %w", gvk, err)
	}
	ar := admissionv1.AdmissionRequest{
		UID:       types.UID("truce-" + string(trigger.GetUID())),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource},
		Namespace: trigger.GetNamespace(),
		Name:      trigger.GetName(),
		Operation: admissionv1.Operation(req.Operation),
		Object:    runtime.RawExtension{Raw: req.Trigger},
	}
	policyContext, err := webhookutils.NewPolicyContextBuilder(configuration, jp).Build(ar, nil, nil, gvk)
	if err != nil {
		return fmt.Errorf("kyverno's policy context for the trigger: %w", err)
	}
	logger := logr.Discard()
	namespaceLabels := map[string]string{}
	if gvk.Kind != "Namespace" && trigger.GetNamespace() != "" {
		if namespaceLabels, err = engineutils.GetNamespaceSelectorsFromNamespaceLister(gvk.Kind, trigger.GetNamespace(), nsLister, []kyvernov1.PolicyInterface{policy}, logger); err != nil {
			return err
		}
	}
	policyContext = policyContext.WithNamespaceLabels(namespaceLabels).WithPolicy(policy)
	response := eng.ApplyBackgroundChecks(ctx, policyContext)
	var rules []string
	for _, r := range response.PolicyResponse.Rules {
		if r.Status() == engineapi.RuleStatusPass && (req.Rule == "" || r.Name() == req.Rule) {
			rules = append(rules, r.Name())
		}
	}
	if len(rules) == 0 {
		return nil
	}

	kyvernoClient := kyvernofake.NewSimpleClientset(policy.(runtime.Object)) //lint:ignore SA1019 the only constructor Kyverno generates
	kyvernoInformers := kyvernoinformers.NewSharedInformerFactory(kyvernoClient, 0)
	cpols := kyvernoInformers.Kyverno().V1().ClusterPolicies().Lister()
	pols := kyvernoInformers.Kyverno().V1().Policies().Lister()
	kyvernoInformers.Start(ctx.Done())
	kyvernoInformers.WaitForCacheSync(ctx.Done())
	status := &urStatus{}
	controller := bgmutate.NewMutateExistingController(fc.client, kyvernoClient, status, eng, cpols, pols, nsLister, configuration, event.NewFake(), logger, jp)
	for _, rule := range rules {
		ur := &kyvernov2.UpdateRequest{
			Spec: kyvernov2.UpdateRequestSpec{
				Type:   kyvernov2.Mutate,
				Policy: policyKey(policy),
				Rule:   rule,
				Resource: kyvernov1.ResourceSpec{
					APIVersion: trigger.GetAPIVersion(), Kind: trigger.GetKind(),
					Namespace: trigger.GetNamespace(), Name: trigger.GetName(), UID: trigger.GetUID(),
				},
				Context: kyvernov2.UpdateRequestSpecContext{
					AdmissionRequestInfo: kyvernov2.AdmissionRequestInfoObject{AdmissionRequest: &ar, Operation: ar.Operation},
				},
			},
		}
		ur.Name = "truce-" + rule
		if err := controller.ProcessUR(ur); err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s/%s: %v", policyKey(policy), rule, err))
		}
	}
	resp.Errors = append(resp.Errors, status.failed...)
	return fc.readBack(ctx, nil, resp)
}
