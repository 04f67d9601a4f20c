package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/kyverno/kyverno/pkg/autogen"
	celengine "github.com/kyverno/kyverno/pkg/cel/engine"
	mpolengine "github.com/kyverno/kyverno/pkg/cel/policies/mpol/engine"
	vpolengine "github.com/kyverno/kyverno/pkg/cel/policies/vpol/engine"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	"github.com/kyverno/sdk/extensions/regcreds"
)

// What truce cannot give Kyverno offline shows in Kyverno's answer only as
// a rule's error, worded by Kyverno. Each review collects those errors, as
// the engines return them, into a list the helper answers beside the
// review: truce reports it as Unpredictable, and Kyverno's own answer is
// left as it is.

// offlineMarkers are what the errors of truce's offline stand-ins say:
// the registry client and transport, the global context store, and the
// HTTP allowlist (its refusal names the URL; the allowlist is truce's
// reserved name, so every refusal is the offline guard's).
var offlineMarkers = []string{
	errRegistryOffline.Error(),
	errOffline.Error(),
	errGlobalContextOffline.Error(),
	"is not permitted: no matching allowlist entry",
}

// isOffline reports whether a rule's message is one of truce's offline
// stand-ins refusing what the rule reached for.
func isOffline(msg string) bool {
	for _, m := range offlineMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

type unpredictableKey struct{}

// unpredictable collects what one review could not decide offline.
type unpredictable struct {
	mu   sync.Mutex
	seen map[string]bool
}

func withUnpredictable(ctx context.Context) (context.Context, *unpredictable) {
	u := &unpredictable{seen: map[string]bool{}}
	return context.WithValue(ctx, unpredictableKey{}, u), u
}

// record notes what; reviews that carry no collector (the background
// controllers' runs) record nothing.
func record(ctx context.Context, what string) {
	u, _ := ctx.Value(unpredictableKey{}).(*unpredictable)
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen[what] = true
}

func (u *unpredictable) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]string, 0, len(u.seen))
	for w := range u.seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// offlineDial refuses every connection of Kyverno's registry transport
// (regcreds.DefaultTransport, which the ImageValidatingPolicy engine and
// the CEL image-data library use instead of the registry client truce
// replaces): no name lookup, no connection.
func offlineDial(_ context.Context, _, addr string) (net.Conn, error) {
	return nil, fmt.Errorf("registry %s: %w", addr, errRegistryOffline)
}

// offlineRegistryTransport puts offlineDial under Kyverno's shared registry
// transport. It must run before any registry option is built (DefaultOpts
// reads the variable each time it is called).
func offlineRegistryTransport() {
	regcreds.DefaultTransport = &http.Transport{DialContext: offlineDial, DialTLSContext: offlineDial}
}

// recordingEngine is Kyverno's engine, recording the rules whose errors are
// truce's offline stand-ins (verifyImages, imageRegistry, apiCall and
// globalReference context entries) for the review it runs in.
type recordingEngine struct {
	engineapi.Engine
}

func (e recordingEngine) Validate(ctx context.Context, pc engineapi.PolicyContext) engineapi.EngineResponse {
	r := e.Engine.Validate(ctx, pc)
	recordRules(ctx, r)
	return r
}

func (e recordingEngine) Mutate(ctx context.Context, pc engineapi.PolicyContext) engineapi.EngineResponse {
	r := e.Engine.Mutate(ctx, pc)
	recordRules(ctx, r)
	return r
}

func (e recordingEngine) VerifyAndPatchImages(ctx context.Context, pc engineapi.PolicyContext) (engineapi.EngineResponse, engineapi.ImageVerificationMetadata) {
	r, m := e.Engine.VerifyAndPatchImages(ctx, pc)
	recordRules(ctx, r)
	return r, m
}

var _ engineapi.Engine = recordingEngine{}

func recordRules(ctx context.Context, r engineapi.EngineResponse) {
	var unsent map[string][]string
	for _, rule := range r.PolicyResponse.Rules {
		if rule.Status() == engineapi.RuleStatusError || rule.Status() == engineapi.RuleStatusFail {
			if isOffline(rule.Message()) {
				record(ctx, fmt.Sprintf("Kyverno %s rule %s: %s", policyName(r.Policy()), rule.Name(), rule.Message()))
			}
		}
		// A rule the engine answered for loaded its context. What an
		// API path or a ConfigMap holds in the cluster is not in the
		// helper's fake clients (truce sends Namespaces and RBAC bindings):
		// Kyverno read not found, or its entry's default, whatever the
		// rule's answer.
		if unsent == nil {
			unsent = unsentContext(r.Policy())
		}
		for _, why := range unsent[rule.Name()] {
			record(ctx, fmt.Sprintf("Kyverno %s rule %s: %s", policyName(r.Policy()), rule.Name(), why))
		}
	}
}

// unsentContext names, by rule (autogen rules included), the context
// entries of a ClusterPolicy or Policy that read what truce does not send
// the helper: apiCall entries to API server paths, configMap entries — in
// a rule's context or its validate or mutate foreach's.
func unsentContext(p engineapi.GenericPolicy) map[string][]string {
	out := map[string][]string{}
	if p == nil || p.AsKyvernoPolicy() == nil {
		return out
	}
	for _, rule := range autogen.Default.ComputeRules(p.AsKyvernoPolicy(), "") {
		entries := rule.Context
		if rule.Validation != nil {
			for _, f := range rule.Validation.ForEachValidation {
				entries = append(entries, f.Context...)
			}
		}
		if rule.Mutation != nil {
			for _, f := range rule.Mutation.ForEachMutation {
				entries = append(entries, f.Context...)
			}
		}
		for _, e := range entries {
			switch {
			case e.APICall != nil && e.APICall.Service == nil && e.APICall.URLPath != "":
				out[rule.Name] = append(out[rule.Name], fmt.Sprintf("context entry %q reads %s from the API server, which truce does not send Kyverno offline: Kyverno answered without it", e.Name, e.APICall.URLPath))
			case e.ConfigMap != nil:
				out[rule.Name] = append(out[rule.Name], fmt.Sprintf("context entry %q reads the ConfigMap %s/%s, which truce does not send Kyverno offline: Kyverno answered without it", e.Name, e.ConfigMap.Namespace, e.ConfigMap.Name))
			}
		}
	}
	return out
}

// policyName is "KIND NAME" or "KIND NAMESPACE/NAME".
func policyName(p engineapi.GenericPolicy) string {
	if p == nil {
		return "policy"
	}
	name := p.GetName()
	if ns := p.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return p.GetKind() + " " + name
}

// recordingVpolEngine is Kyverno's ValidatingPolicy engine, recording the
// policies whose CEL reached for what truce refuses offline (http,
// image data, global context) for the review it runs in.
type recordingVpolEngine struct {
	vpolengine.Engine
}

func (e recordingVpolEngine) Handle(ctx context.Context, req vpolengine.EngineRequest, p vpolengine.Predicate) (vpolengine.EngineResponse, error) {
	r, err := e.Engine.Handle(ctx, req, p)
	for _, pr := range r.Policies {
		recordCELRules(ctx, pr.Policy.GetKind(), pr.Policy.GetNamespace(), pr.Policy.GetName(), pr.Rules)
	}
	return r, err
}

// recordingMpolEngine is recordingVpolEngine for MutatingPolicies.
type recordingMpolEngine struct {
	mpolengine.Engine
}

func (e recordingMpolEngine) Handle(ctx context.Context, req celengine.EngineRequest, p mpolengine.Predicate) (mpolengine.EngineResponse, error) {
	r, err := e.Engine.Handle(ctx, req, p)
	for _, pr := range r.Policies {
		recordCELRules(ctx, pr.Policy.GetKind(), pr.Policy.GetNamespace(), pr.Policy.GetName(), pr.Rules)
	}
	return r, err
}

func recordCELRules(ctx context.Context, kind, namespace, name string, rules []engineapi.RuleResponse) {
	if namespace != "" {
		name = namespace + "/" + name
	}
	for _, rule := range rules {
		if rule.Status() != engineapi.RuleStatusError && rule.Status() != engineapi.RuleStatusFail {
			continue
		}
		if isOffline(rule.Message()) {
			record(ctx, fmt.Sprintf("Kyverno %s %s: %s", kind, name, rule.Message()))
		}
	}
}
