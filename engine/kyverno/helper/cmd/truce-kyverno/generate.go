package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	"github.com/kyverno/kyverno/pkg/autogen"
	"github.com/kyverno/kyverno/pkg/background/common"
	"github.com/kyverno/kyverno/pkg/background/generate"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	"github.com/kyverno/kyverno/pkg/engine/jmespath"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	admissionv1 "k8s.io/api/admission/v1"
)

// runGenerate answers OpGenerate: the policies' generate rules, and, for a
// trigger, what Kyverno's generate controller writes when it processes an
// UpdateRequest for it (pkg/background/generate: the same policy context,
// engine.Generate to see which rules still apply, ApplyGeneratePolicy),
// against a fake cluster holding the objects truce sent. The writes are
// read back from that fake cluster: objects it created, and objects sent
// that it changed (a synchronized downstream object, the clone-source
// label Kyverno puts on a source).
func runGenerate(ctx context.Context, req *protocol.BackgroundRequest) (*protocol.BackgroundResponse, error) {
	policies, gpols, err := decodePolicies(req.Policies)
	if err != nil {
		return nil, err
	}
	resp := &protocol.BackgroundResponse{}
	for _, p := range policies {
		resp.Rules = append(resp.Rules, generateRules(p)...)
	}
	for _, p := range gpols {
		resp.Rules = append(resp.Rules, gpolRule(p, req.Resources))
	}
	if len(req.Trigger) == 0 {
		return resp, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fc, err := newFakeCluster(ctx, req)
	if err != nil {
		return nil, err
	}
	client, kubeClient, trigger := fc.client, fc.kube, fc.trigger
	configuration, err := defaultConfiguration()
	if err != nil {
		return nil, err
	}
	// Kyverno's resource filters (kube-system, Events, its own objects…)
	// keep such a trigger from ever reaching its webhook, so no
	// UpdateRequest is made for it.
	if t := trigger; configuration.ToFilter(t.GroupVersionKind(), "", t.GetNamespace(), t.GetName()) {
		return resp, nil
	}
	jp := jmespath.New(configuration)
	// Kyverno's background controller reads no PolicyExceptions here.
	eng, err := newEngine(configuration, jp, client, kubeClient, nil)
	if err != nil {
		return nil, err
	}
	controller := generate.NewGenerateControllerWithOnlyClient(client, eng)
	logger := logr.Discard()
	urContext := kyvernov2.UpdateRequestSpecContext{
		UserRequestInfo:      kyvernov2.RequestInfo{},
		AdmissionRequestInfo: kyvernov2.AdmissionRequestInfoObject{Operation: admissionv1.Operation(req.Operation)},
	}
	var created []kyvernov1.ResourceSpec
	for _, policy := range policies {
		if !policy.GetSpec().HasGenerate() || (req.Policy != "" && policyKey(policy) != req.Policy) {
			continue
		}
		policyContext, err := common.NewBackgroundContext(logger, client, urContext, policy, trigger, configuration, jp, req.NamespaceLabels)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", policyKey(policy), err))
			continue
		}
		// Which rules still apply to the trigger, as the controller asks
		// before generating.
		response := eng.Generate(ctx, policyContext)
		var applicable []string
		for _, r := range response.PolicyResponse.Rules {
			if r.Status() == engineapi.RuleStatusPass && (req.Rule == "" || r.Name() == req.Rule) {
				applicable = append(applicable, r.Name())
			}
		}
		if len(applicable) == 0 {
			continue
		}
		byRule, err := controller.ApplyGeneratePolicy(logger, policyContext, applicable)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", policyKey(policy), err))
			continue
		}
		for _, specs := range byRule {
			created = append(created, specs...)
		}
	}

	if len(gpols) > 0 && req.Rule == "" {
		generated, errs := runGeneratingPolicies(ctx, req, gpols, client, kubeClient, trigger)
		resp.Errors = append(resp.Errors, errs...)
		for _, g := range generated {
			created = append(created, kyvernov1.ResourceSpec{APIVersion: g.GetAPIVersion(), Kind: g.GetKind(), Namespace: g.GetNamespace(), Name: g.GetName()})
		}
	}

	if err := fc.readBack(ctx, created, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// decodePolicies decodes the ClusterPolicies, Policies and
// GeneratingPolicies of raws; other kinds are an error (truce sends only
// these).
func decodePolicies(raws []json.RawMessage) ([]kyvernov1.PolicyInterface, []policiesv1beta1.GeneratingPolicyLike, error) {
	d, err := decodeObjects(raws)
	if err != nil {
		return nil, nil, err
	}
	var out []kyvernov1.PolicyInterface
	var gpols []policiesv1beta1.GeneratingPolicyLike
	for _, o := range d.kyverno {
		switch p := o.(type) {
		case kyvernov1.PolicyInterface:
			out = append(out, p)
		case policiesv1beta1.GeneratingPolicyLike:
			gpols = append(gpols, p)
		default:
			return nil, nil, fmt.Errorf("%T is not a ClusterPolicy, Policy or GeneratingPolicy", o)
		}
	}
	return out, gpols, nil
}

func policyKey(p kyvernov1.PolicyInterface) string {
	if p.GetNamespace() != "" {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// generateRules describes p's generate rules as autogen computes them.
func generateRules(p kyvernov1.PolicyInterface) []protocol.BackgroundRule {
	var out []protocol.BackgroundRule
	for _, rule := range autogen.Default.ComputeRules(p, "") {
		if !rule.HasGenerate() {
			continue
		}
		g := rule.Generation
		r := protocol.BackgroundRule{
			Policy:      policyKey(p),
			Rule:        rule.Name,
			Kinds:       matchKinds(rule),
			Synchronize: g.Synchronize,
			APIVersion:  g.APIVersion,
			Kind:        g.Kind,
			Namespace:   g.Namespace,
			Name:        g.Name,
		}
		if g.Clone.Name != "" {
			r.Clone = g.Clone.Namespace + "/" + g.Clone.Name
		}
		if len(g.CloneList.Kinds) > 0 {
			r.CloneList, r.CloneNamespace = g.CloneList.Kinds, g.CloneList.Namespace
		}
		var why []string
		entries := rule.Context
		if len(g.ForEachGeneration) > 0 {
			why = append(why, "foreach generation (truce does not yet say when its elements change)")
			for _, f := range g.ForEachGeneration {
				entries = append(entries, f.Context...)
			}
		}
		why = append(why, contextReasons(entries, "the generate controller")...)
		r.Unpredictable = strings.Join(why, "; ")
		out = append(out, r)
	}
	return out
}

// contextReasons names the context entries a background controller
// (who) cannot be given offline.
func contextReasons(entries []kyvernov1.ContextEntry, who string) []string {
	var why []string
	for _, e := range entries {
		switch {
		case e.APICall != nil && e.APICall.Service != nil:
			why = append(why, fmt.Sprintf("context entry %q calls the service %s", e.Name, e.APICall.Service.URL))
		case e.APICall != nil && e.APICall.URLPath != "":
			why = append(why, fmt.Sprintf("context entry %q reads %s from the API server, which %s is not given offline", e.Name, e.APICall.URLPath, who))
		case e.ImageRegistry != nil:
			why = append(why, fmt.Sprintf("context entry %q reads image data from a registry", e.Name))
		case e.GlobalReference != nil:
			why = append(why, fmt.Sprintf("context entry %q reads the global context entry %s", e.Name, e.GlobalReference.Name))
		case e.ConfigMap != nil:
			why = append(why, fmt.Sprintf("context entry %q reads the ConfigMap %s/%s, which %s is not given offline", e.Name, e.ConfigMap.Namespace, e.ConfigMap.Name, who))
		}
	}
	return why
}

// matchKinds are the kinds of a rule's match block, any and all included,
// once each.
func matchKinds(rule kyvernov1.Rule) []string {
	seen := map[string]bool{}
	var out []string
	add := func(kinds []string) {
		for _, k := range kinds {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	add(rule.MatchResources.GetKinds())
	return out
}
