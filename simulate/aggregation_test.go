package simulate

import (
	"context"
	"maps"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/truce-dev/truce/cluster"
)

// The aggregated role of Git: rules [] that the controller fills.
const monitoring = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: monitoring}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {rbac.example.com/aggregate-to-monitoring: "true"}
rules: []
`

// The same without rules: the controller's field alone.
var noRules = strings.TrimSuffix(monitoring, "rules: []\n")

// Two roles it aggregates, the second sharing a rule with the first.
const monitoringParts = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-pods
  labels: {rbac.example.com/aggregate-to-monitoring: "true"}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-endpoints
  labels: {rbac.example.com/aggregate-to-monitoring: "true"}
rules:
- {apiGroups: [""], resources: [endpoints], verbs: [get]}
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
`

func clusterRoles(t *testing.T, docs string) []*rbacv1.ClusterRole {
	t.Helper()
	var out []*rbacv1.ClusterRole
	for _, o := range objects(t, docs) {
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, &r)
	}
	return out
}

func mustList(t *testing.T, c cluster.Cluster) []*unstructured.Unstructured {
	t.Helper()
	objs, err := c.List(context.Background(), clusterRoleGVK, "")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestAggregatedRules(t *testing.T) {
	cases := []struct {
		name string
		// The first role is the aggregating one.
		roles   string
		want    string // resources of the rules, in order; "nil" for no write
		wantErr string
	}{
		{name: "union in name order, each rule once", roles: monitoring + "---\n" + monitoringParts, want: "endpoints pods"},
		{name: "selectors in their order", roles: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agg}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {tier: z}
  - matchExpressions: [{key: tier, operator: In, values: [a]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: a, labels: {tier: a}}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: z, labels: {tier: z}}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
`, want: "configmaps secrets"},
		{name: "itself left out", roles: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agg, labels: {tier: a}}
aggregationRule: {clusterRoleSelectors: [{matchLabels: {tier: a}}]}
rules: [{apiGroups: [""], resources: [nodes], verbs: [get]}]
`, want: ""},
		{name: "no aggregationRule", roles: monitoringParts, want: "nil"},
		{name: "bad selector", roles: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agg}
aggregationRule: {clusterRoleSelectors: [{matchExpressions: [{key: tier, operator: Sometimes}]}]}
`, wantErr: "clusterRoleSelectors[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			roles := clusterRoles(t, tc.roles)
			rules, err := AggregatedRules(roles[0], roles)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "nil"
			if rules != nil {
				var res []string
				for _, r := range rules {
					res = append(res, strings.Join(r.Resources, ","))
				}
				got = strings.Join(res, " ")
			}
			if got != tc.want {
				t.Errorf("rules of %s: %q, want %q", roles[0].Name, got, tc.want)
			}
		})
	}
}

func TestClusterRoleAggregatorAct(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, monitoring+"---\n"+monitoringParts)
	agg := &ClusterRoleAggregator{}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, o := range mustList(t, c) {
			out[o.GetName()] = o.GetResourceVersion()
		}
		return out
	}
	before := versions()
	if err := agg.Act(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, o := range mustList(t, c) {
		changed := o.GetResourceVersion() != before[o.GetName()]
		switch o.GetName() {
		case "monitoring-pods", "monitoring-endpoints":
			if changed {
				t.Errorf("ClusterRole %s without aggregationRule was written", o.GetName())
			}
		case "monitoring":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			if len(rules) != 2 {
				t.Fatalf("rules of monitoring: %v, want the two distinct rules", rules)
			}
			var mine bool
			for _, mf := range o.GetManagedFields() {
				if mf.Manager == AggregationManager && mf.Operation == "Apply" && strings.Contains(mf.FieldsV1.GetRawString(), `"f:rules"`) {
					mine = true
				}
			}
			if !mine {
				t.Errorf("managedFields %+v: want %s applying rules", o.GetManagedFields(), AggregationManager)
			}
		}
	}
	// The bootstrap roles aggregate each other (view into edit into
	// admin): they settle in a pass per level, and monitoring is not
	// written again.
	rv := versions()
	settled := false
	for pass := 0; pass < 4 && !settled; pass++ {
		if err := agg.Act(ctx, c); err != nil {
			t.Fatal(err)
		}
		now := versions()
		settled = maps.Equal(rv, now)
		if now["monitoring"] != rv["monitoring"] {
			t.Errorf("monitoring written again")
		}
		rv = now
	}
	if !settled {
		t.Fatal("the aggregated roles do not settle")
	}
	counts := map[string]int{}
	for _, o := range mustList(t, c) {
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		counts[o.GetName()] = len(rules)
	}
	if !(counts["admin"] > counts["edit"] && counts["edit"] > counts["view"] && counts["view"] > 0) {
		t.Errorf("rules of admin, edit, view: %d, %d, %d; want each to hold the next", counts["admin"], counts["edit"], counts["view"])
	}
}

func TestDetectWritersAggregation(t *testing.T) {
	if ws := DetectWriters(desiredOf(t, monitoringParts)); len(ws) != 0 {
		t.Errorf("writers %v for ClusterRoles without aggregationRule", ws)
	}
	ws := DetectWriters(desiredOf(t, monitoring+"---\n"+strings.ReplaceAll(monitoring, "name: monitoring", "name: other")))
	if len(ws) != 1 {
		t.Fatalf("%d writers, want one aggregation controller", len(ws))
	}
	if a, ok := ws[0].(*ClusterRoleAggregator); !ok || a.Name() != AggregationManager || a.Source != "git.yaml:1 (detected)" {
		t.Errorf("writer %#v", ws[0])
	}
}

func TestAggregatedClusterRoleVerdicts(t *testing.T) {
	argo := func(ignoreAggregated, serverSide bool) func(d []Desired) Tool {
		return func(d []Desired) Tool {
			return &ArgoCD{App: "rbac", Automated: true, SelfHeal: true, Desired: d,
				IgnoreAggregatedRoles: ignoreAggregated, ServerSideDiff: serverSide, ServerSideApply: serverSide}
		}
	}
	flux := func(d []Desired) Tool { return &Flux{Kustomization: "rbac", Desired: d} }
	cases := []struct {
		name string
		// cluster holds the aggregated roles when Git does not.
		cluster, git string
		tool         func([]Desired) Tool
		want         Verdict
	}{
		{name: "argocd legacy diff", git: monitoring + "---\n" + monitoringParts, tool: argo(false, false), want: Loop},
		{name: "argocd legacy diff, ignoreAggregatedRoles", git: monitoring + "---\n" + monitoringParts, tool: argo(true, false), want: Synced},
		{name: "argocd server-side diff", git: monitoring + "---\n" + monitoringParts, tool: argo(false, true), want: Loop},
		{name: "argocd server-side diff, ignoreAggregatedRoles", git: monitoring + "---\n" + monitoringParts, tool: argo(true, true), want: Synced},
		{name: "argocd, aggregated roles in the cluster", cluster: monitoringParts, git: monitoring, tool: argo(false, false), want: Loop},
		{name: "argocd, nothing to aggregate", git: monitoring, tool: argo(false, false), want: Synced},
		{name: "argocd, no rules in Git", git: noRules + "---\n" + monitoringParts, tool: argo(false, false), want: Synced},
		// kustomize-controller's forced apply owns rules: [] and empties the
		// list at every reconciliation (fluxcd/flux2#2472).
		{name: "flux", git: monitoring + "---\n" + monitoringParts, tool: flux, want: Loop},
		// Without rules too: kustomize-controller normalizes objects through
		// their typed form (fluxcd/pkg/ssa normalize), which writes
		// rules: null, as reported in fluxcd/flux2#4586.
		{name: "flux, no rules in Git", git: noRules + "---\n" + monitoringParts, tool: flux, want: Loop},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.cluster)
			d := desiredOf(t, tc.git)
			res, err := Run(context.Background(), c, tc.tool(d), DetectWriters(d), d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Objects[0]
			if o.Ref.Name != "monitoring" {
				t.Fatalf("first object %s", o.Ref)
			}
			if o.Verdict != tc.want {
				for _, w := range res.Writes {
					t.Logf("%s %s %s %s %v %v", w.At, w.Writer, w.Verb, w.Ref.Name, w.Fields, w.Error)
				}
				t.Fatalf("verdict %s (%s), want %s", o.Verdict, o.Reason, tc.want)
			}
			if o.Loop != nil && (o.Loop.Other != AggregationManager || strings.Join(o.Loop.Fields, ",") != "/rules") {
				t.Errorf("loop %+v: want %s over /rules", *o.Loop, AggregationManager)
			}
			t.Logf("%s: %s (writes %d)", o.Verdict, o.Reason, o.Writes)
			for _, other := range res.Objects[1:] {
				if other.Verdict != Synced {
					t.Errorf("%s: %s (%s), want Synced", other.Ref, other.Verdict, other.Reason)
				}
			}
		})
	}
}
