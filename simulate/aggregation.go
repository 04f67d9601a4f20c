package simulate

import (
	"context"
	"fmt"
	"sort"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/truce-dev/truce/cluster"
)

// AggregationManager is the field manager the aggregation controller
// applies as (kubernetes pkg/controller/clusterroleaggregation).
const AggregationManager = "clusterrole-aggregation-controller"

// clusterRoleGVK is the version the controller reads and writes.
var clusterRoleGVK = rbacv1.SchemeGroupVersion.WithKind("ClusterRole")

// ClusterRoleAggregator is the clusterrole-aggregation controller: it
// sets the rules of every ClusterRole with an aggregationRule to the union
// of the rules of the ClusterRoles its selectors match, with a forced
// server-side apply. Its sync is kubernetes' syncClusterRole, step for
// step: that function is only reachable through the controller's worker
// queue, which runs on its own goroutines and cannot be stepped by the
// simulation's clock.
type ClusterRoleAggregator struct {
	After  time.Duration
	Source string
}

// Name implements Writer.
func (a *ClusterRoleAggregator) Name() string { return AggregationManager }

// Describe implements Writer.
func (a *ClusterRoleAggregator) Describe() string {
	return fmt.Sprintf("%s %q writes the rules of every ClusterRole with an aggregationRule", TypeClusterRoleAggregation, AggregationManager)
}

// Watches implements Writer: any ClusterRole change re-queues every
// aggregated ClusterRole, as the controller's event handlers do.
func (a *ClusterRoleAggregator) Watches(ref cluster.Ref) bool {
	return ref.Group == rbacv1.GroupName && ref.Kind == "ClusterRole"
}

// Delay implements Writer.
func (a *ClusterRoleAggregator) Delay() time.Duration { return a.After }

// Act implements Writer: one pass over the aggregated ClusterRoles, in
// name order. A ClusterRole that aggregates another aggregated one
// settles in later passes, woken by this pass's writes, as in the
// controller.
func (a *ClusterRoleAggregator) Act(ctx context.Context, c cluster.Cluster) error {
	objs, err := c.List(ctx, clusterRoleGVK, "")
	if err != nil {
		return fmt.Errorf("listing ClusterRoles: %w", err)
	}
	roles := make([]*rbacv1.ClusterRole, 0, len(objs))
	for _, o := range objs {
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			return fmt.Errorf("reading ClusterRole %s: %w", o.GetName(), err)
		}
		roles = append(roles, &r)
	}
	sort.Sort(byName(roles))
	for _, shared := range roles {
		rules, err := AggregatedRules(shared, roles)
		if err != nil {
			// The controller retries with backoff and never succeeds; the
			// API server validates selectors, so this is a hand-made
			// cluster state.
			return fmt.Errorf("ClusterRole %s: %w", shared.Name, err)
		}
		if rules == nil || equality.Semantic.DeepEqual(rules, shared.Rules) {
			continue
		}
		patch, err := aggregationApply(shared.Name, rules)
		if err != nil {
			return err
		}
		if _, err := c.Apply(ctx, patch, cluster.ApplyOptions{FieldManager: AggregationManager, Force: true}); err != nil && !isAPIError(err) {
			return err
		}
	}
	return nil
}

// AggregatedRules is what the controller writes into shared's rules: for
// each of its clusterRoleSelectors in order, the rules of the matching
// ClusterRoles of roles in name order (shared itself left out), each rule
// once. It is nil when shared has no aggregationRule.
func AggregatedRules(shared *rbacv1.ClusterRole, roles []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	if shared.AggregationRule == nil {
		return nil, nil
	}
	sorted := append([]*rbacv1.ClusterRole(nil), roles...)
	sort.Sort(byName(sorted))
	out := []rbacv1.PolicyRule{}
	for i := range shared.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&shared.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, fmt.Errorf("aggregationRule.clusterRoleSelectors[%d]: %w", i, err)
		}
		for _, r := range sorted {
			if r.Name == shared.Name || !sel.Matches(labels.Set(r.Labels)) {
				continue
			}
			for _, rule := range r.Rules {
				if !ruleExists(out, rule) {
					out = append(out, rule)
				}
			}
		}
	}
	return out, nil
}

func ruleExists(haystack []rbacv1.PolicyRule, needle rbacv1.PolicyRule) bool {
	for _, r := range haystack {
		if equality.Semantic.DeepEqual(r, needle) {
			return true
		}
	}
	return false
}

// aggregationApply is the controller's apply configuration: the name and
// the rules, nothing else.
func aggregationApply(name string, rules []rbacv1.PolicyRule) (*unstructured.Unstructured, error) {
	ac := rbacv1ac.ClusterRole(name)
	for _, r := range rules {
		p := rbacv1ac.PolicyRule()
		p.Resources, p.ResourceNames, p.APIGroups, p.NonResourceURLs, p.Verbs = r.Resources, r.ResourceNames, r.APIGroups, r.NonResourceURLs, r.Verbs
		ac.WithRules(p)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ac)
	if err != nil {
		return nil, fmt.Errorf("encoding the aggregated rules of ClusterRole %s: %w", name, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

type byName []*rbacv1.ClusterRole

func (a byName) Len() int           { return len(a) }
func (a byName) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a byName) Less(i, j int) bool { return a[i].Name < a[j].Name }

// isAggregatedClusterRole reports whether o is a ClusterRole with an
// aggregationRule.
func isAggregatedClusterRole(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	if gvk.Group != rbacv1.GroupName || gvk.Kind != "ClusterRole" {
		return false
	}
	_, ok := o.Object["aggregationRule"].(map[string]any)
	return ok
}
