package main

import (
	"fmt"
	"strings"

	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	"github.com/kyverno/kyverno/pkg/autogen"
	kyvernov1listers "github.com/kyverno/kyverno/pkg/client/listers/kyverno/v1"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/policycache"
	kubeutils "github.com/kyverno/kyverno/pkg/utils/kube"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// fillPolicyCache puts the ClusterPolicies and Policies into Kyverno's
// policy cache as its policy-cache controller leaves them once it has
// reconciled each (pkg/controllers/policycache reconcile): a policy that
// processes admission and is ready is set, the others unset.
//
// The controller's WarmUp stops at the first policy whose kinds discovery
// cannot resolve (a ClusterPolicy for a CRD the cluster does not have);
// a running Kyverno then reconciles every policy anyway, and a failed Set
// still places the policy for the kinds that were found. Doing the same
// here keeps one such policy from failing every other: its error becomes a
// warning naming it.
func fillPolicyCache(pc policycache.Cache, client dclient.Interface, cpols kyvernov1listers.ClusterPolicyLister, pols kyvernov1listers.PolicyLister) ([]string, error) {
	var all []kyvernov1.PolicyInterface
	cl, err := cpols.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, p := range cl {
		all = append(all, p)
	}
	nl, err := pols.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, p := range nl {
		all = append(all, p)
	}
	var warnings []string
	for _, p := range all {
		key, err := cache.MetaNamespaceKeyFunc(p)
		if err != nil {
			return nil, err
		}
		if !p.AdmissionProcessingEnabled() || p.GetSpec().CustomWebhookMatchConditions() || !p.IsReady() {
			pc.Unset(key)
			continue
		}
		if err := pc.Set(key, p, client.Discovery()); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s matches kinds the cluster does not serve (%s): Kyverno applies it to the others (%v)", legacyPolicyName(p), strings.Join(unknownKinds(p, client.Discovery()), ", "), err))
		}
	}
	return warnings, nil
}

// unknownKinds names the kinds p's rules match that discovery does not
// resolve, as the policy cache looks them up (to name them only).
func unknownKinds(p kyvernov1.PolicyInterface, disco policycache.ResourceFinder) []string {
	seen := map[string]bool{}
	var out []string
	for _, rule := range autogen.Default.ComputeRules(p, "") {
		for _, k := range rule.MatchResources.GetKinds() {
			group, version, kind, sub := kubeutils.ParseKindSelector(k)
			if _, err := disco.FindResources(group, version, kind, sub); err != nil && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}
