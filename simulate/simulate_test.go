package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/drift/ignore"
)

const shop = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
`

const mirrorPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mirror}
spec:
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
          containers: object.spec.template.spec.containers
            .filter(c, !c.image.startsWith("registry.internal/"))
            .map(c, Object.spec.template.spec.containers{name: c.name, image: "registry.internal/" + c.image})}}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mirror}
spec: {policyName: mirror}
`

const web = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: nginx, image: "nginx:1.27"}
`

func TestImageMirrorArgoCDLoops(t *testing.T) {
	c := newCluster(t, shop+"---\n"+mirrorPolicy)
	desired := desiredOf(t, web)
	tool := &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: desired}
	res, err := Run(context.Background(), c, tool, nil, desired, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(res.Objects, "", "  ")
	t.Logf("%s", b)
	for _, r := range res.Rounds {
		t.Logf("%s %s %v", r.At, r.Trigger, r.Applied)
	}
	o := res.Objects[0]
	if o.Verdict != Loop {
		t.Fatalf("verdict %s, want Loop", o.Verdict)
	}
	if o.Loop.Period != 300*time.Second {
		t.Errorf("period %s, want the backoff cap 5m0s", o.Loop.Period)
	}
}

func testHPA() *FieldWriter {
	return &FieldWriter{Type: "HorizontalPodAutoscaler", Manager: "kube-controller-manager",
		Target: Selector{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Set:    map[string]any{"/spec/replicas": int64(5)}, After: 15 * time.Second}
}

func TestVerdicts(t *testing.T) {
	flux := func(rules ...string) func(d []Desired) Tool {
		return func(d []Desired) Tool {
			f := &Flux{Kustomization: "app", Desired: d}
			for _, p := range rules {
				f.Rules = append(f.Rules, fluxRule(p, "Deployment"))
			}
			return f
		}
	}
	argo := func(selfHeal bool) func(d []Desired) Tool {
		return func(d []Desired) Tool { return &ArgoCD{App: "shop", Automated: true, SelfHeal: selfHeal, Desired: d} }
	}
	cases := []struct {
		name    string
		cluster string
		git     string
		tool    func([]Desired) Tool
		writers []Writer
		want    Verdict
		other   string
	}{
		{name: "flux dry run includes the mutation", cluster: shop + "---\n" + mirrorPolicy, git: web, tool: flux(), want: Synced},
		{name: "argocd without self-heal stays OutOfSync", cluster: shop + "---\n" + mirrorPolicy, git: web, tool: argo(false), want: OutOfSync},
		{name: "argocd and an HPA", cluster: shop, git: web, tool: argo(true), writers: []Writer{testHPA()}, want: Loop, other: "kube-controller-manager"},
		{name: "flux and an HPA", cluster: shop, git: web, tool: flux(), writers: []Writer{testHPA()}, want: Loop, other: "kube-controller-manager"},
		{name: "flux ignores replicas", cluster: shop, git: web, tool: flux("/spec/replicas"), writers: []Writer{testHPA()}, want: Synced},
		{name: "no writer", cluster: shop, git: web, tool: argo(true), want: Synced},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.cluster)
			d := desiredOf(t, tc.git)
			res, err := Run(context.Background(), c, tc.tool(d), tc.writers, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Objects[0]
			if o.Verdict != tc.want {
				for _, w := range res.Writes {
					t.Logf("%s %s %s %v %v", w.At, w.Writer, w.Verb, w.Fields, w.Error)
				}
				t.Fatalf("verdict %s (%s), want %s", o.Verdict, o.Reason, tc.want)
			}
			if tc.other != "" && o.Loop.Other != tc.other {
				t.Errorf("other writer %q, want %q", o.Loop.Other, tc.other)
			}
			t.Logf("%s: %s (writes %d)", o.Verdict, o.Reason, o.Writes)
			if o.Loop != nil {
				t.Logf("loop: %+v", *o.Loop)
			}
		})
	}
}

// The writes extrapolated beyond the simulated rounds are the writes a
// simulation of the whole window makes (the real server agrees: e2e/simulate).
func TestExtrapolationCountsTheWholeWindow(t *testing.T) {
	cases := []struct {
		name, cluster string
		writers       func() []Writer
	}{
		{name: "image mirror", cluster: shop + "---\n" + mirrorPolicy, writers: func() []Writer { return nil }},
		{name: "hpa", cluster: shop, writers: func() []Writer { return []Writer{testHPA()} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			count := func(max int) (int, *Result) {
				d := desiredOf(t, web)
				res, err := Run(context.Background(), newCluster(t, tc.cluster),
					&ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d}, tc.writers(), d, Options{MaxRounds: max})
				if err != nil {
					t.Fatal(err)
				}
				return res.Objects[0].Writes, res
			}
			predicted, res := count(0)
			full, _ := count(math.MaxInt)
			if predicted != full {
				t.Errorf("predicted %d writes (%d made up to %s, the rest extrapolated), the whole window holds %d",
					predicted, len(res.Writes), res.Simulated, full)
			}
		})
	}
}

// TestArgoCompareWorkersAgree: diffing the objects of a round several at a
// time gives the simulation of diffing them one after another — loops,
// syncs and every write — for Deployments the mirror policy rewrites and
// objects it leaves alone, with and without ignore rules.
func TestArgoCompareWorkersAgree(t *testing.T) {
	var git strings.Builder
	for i := range 24 {
		fmt.Fprintf(&git, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web-%d, namespace: shop}\n"+
			"spec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"+
			"    spec:\n      containers:\n      - {name: nginx, image: \"%s\"}\n", i, []string{"nginx:1.27", "registry.internal/nginx:1.27"}[i%2])
		fmt.Fprintf(&git, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: shop}\ndata: {k: v}\n", i)
	}
	rules, err := ignore.Compile([]ignore.Rule{{Tool: ignore.ArgoCD, Target: ignore.Target{Group: "apps", Kind: "Deployment", Name: "web-3"},
		JSONPointers: []string{"/spec/template/spec/containers/0/image"}}}, ignore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	run := func(workers int) string {
		d := desiredOf(t, git.String())
		tool := &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d, Rules: rules, compareWorkers: workers}
		res, err := Run(context.Background(), newCluster(t, shop+"---\n"+mirrorPolicy), tool, nil, d, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(struct {
			Objects []*Object
			Rounds  int
		}{res.Objects, len(res.Rounds)})
		if err != nil {
			t.Fatal(err)
		}
		return uids.ReplaceAllString(string(b), "UID")
	}
	one, four := run(1), run(4)
	if one != four {
		t.Errorf("one at a time:\n%s\nfour at a time:\n%s", one, four)
	}
	if !strings.Contains(one, `"Loop"`) || !strings.Contains(one, `"Synced"`) {
		t.Errorf("want loops and synced objects both: %s", one)
	}
}
