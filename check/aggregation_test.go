package check

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

const aggregatedRoles = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: monitoring}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {rbac.example.com/aggregate-to-monitoring: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-pods
  labels: {rbac.example.com/aggregate-to-monitoring: "true"}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
`

const rbacApp = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: rbac, namespace: argocd}
spec:
  destination: {server: https://kubernetes.default.svc}
  syncPolicy:
    automated: {selfHeal: true}
`

// An aggregated ClusterRole with rules: [] in Git loops under Argo CD's
// self-heal: the clusterrole-aggregation controller fills the rules, Argo
// CD empties them. ignoreAggregatedRoles in argocd-cm is the fix, verified;
// without an argocd-cm the fix says what to set.
func TestAggregatedClusterRoleFix(t *testing.T) {
	argocdCM := func(compare string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm, namespace: argocd}\ndata:\n  application.resourceTrackingMethod: annotation\n"
		if compare != "" {
			s += "  resource.compareoptions: |\n    " + compare + "\n"
		}
		return s
	}
	cases := []struct {
		name string
		cm   string
		// want is the chosen fix's kind, "" for the ignore rule.
		wantVerdict simulate.Verdict
		wantFix     fix.Kind
		wantNote    string
		wantCM      []string
	}{
		{name: "argocd-cm without compare options", cm: argocdCM(""), wantVerdict: simulate.Loop, wantFix: fix.KindAggregatedRoles,
			wantCM: []string{"resource.compareoptions", "ignoreAggregatedRoles: true"}},
		{name: "other compare options kept", cm: argocdCM("ignoreResourceStatusField: crd"), wantVerdict: simulate.Loop, wantFix: fix.KindAggregatedRoles,
			wantCM: []string{"ignoreAggregatedRoles: true", "ignoreResourceStatusField: crd"}},
		{name: "no argocd-cm", wantVerdict: simulate.Loop, wantFix: fix.KindIgnoreRule,
			wantNote: `no argocd-cm in the repository to change (set resource.compareoptions: "ignoreAggregatedRoles: true" in it)`},
		{name: "already ignored", cm: argocdCM("ignoreAggregatedRoles: true"), wantVerdict: simulate.Synced},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"app.yaml": rbacApp, "rbac.yaml": aggregatedRoles}
			if tc.cm != "" {
				files["argocd-cm.yaml"] = tc.cm
			}
			writeFiles(t, root, files)
			ctx := context.Background()
			objs, err := manifest.LoadPaths(ctx, []string{root}, manifest.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			out, err := Run(ctx, Request{Input: Input{Repository: objs}, Sources: Sources{Repository: []string{root}}, Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			got := verdicts([]*Outcome{out})
			var verdict simulate.Verdict
			for _, objs := range got {
				for obj, v := range objs {
					if strings.HasSuffix(obj, "/monitoring") {
						verdict = v
					}
				}
			}
			if verdict != tc.wantVerdict {
				t.Fatalf("ClusterRole monitoring %q, want %s; all %v", verdict, tc.wantVerdict, got)
			}
			if tc.wantVerdict == simulate.Synced {
				return
			}
			var pf *ProblemFixes
			for _, p := range out.Problems {
				if p.Ref.Name == "monitoring" {
					pf = p
				}
			}
			if pf == nil || pf.Chosen == nil || pf.Chosen.Kind != tc.wantFix {
				t.Fatalf("chosen fix %+v, want %s (notes %v)", pf.Chosen, tc.wantFix, pf.Notes)
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(pf.Notes, "\n"), tc.wantNote) {
				t.Errorf("notes %q, want %q", pf.Notes, tc.wantNote)
			}
			if tc.wantCM != nil {
				cm := string(pf.Chosen.Content(filepath.Join(root, "argocd-cm.yaml")))
				for _, s := range tc.wantCM {
					if !strings.Contains(cm, s) {
						t.Errorf("argocd-cm after the fix lacks %q:\n%s", s, cm)
					}
				}
				for i, c := range pf.Candidates {
					if c.Kind == fix.KindAggregatedRoles && pf.Verdicts[i] != simulate.Synced {
						t.Errorf("verified %q, want Synced", pf.Verdicts[i])
					}
				}
			}
		})
	}
}

// Verifying a fix of an aggregated ClusterRole simulates the ClusterRoles
// it aggregates too: without them the controller has nothing to write and
// any fix would look verified.
func TestFocusKeepsAggregatedClusterRoles(t *testing.T) {
	var desired []simulate.Desired
	for _, o := range simulateObjects(t, aggregatedRoles+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n") {
		desired = append(desired, simulate.Desired{Object: o})
	}
	var names []string
	for _, d := range focus(desired, cluster.RefOf(desired[0].Object)) {
		names = append(names, d.Object.GetName())
	}
	if got := strings.Join(names, ","); got != "monitoring,monitoring-pods" {
		t.Errorf("focus on ClusterRole monitoring: %s, want monitoring,monitoring-pods", got)
	}
}

func simulateObjects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifest.Decode("x.yaml", strings.NewReader(docs), manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		out = append(out, o.Object)
	}
	return out
}
