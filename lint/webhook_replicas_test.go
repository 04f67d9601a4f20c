package lint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// TestFailClosedSingleReplica: a fail-closed webhook's Service traced to
// the workload serving it, and Kyverno's admission controller for its
// fail-closed policies.
func TestFailClosedSingleReplica(t *testing.T) {
	hook := func(kind, failurePolicy string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ` + kind + `
metadata: {name: hook}
webhooks:
- name: hook.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: ` + failurePolicy + `
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  clientConfig: {service: {namespace: sys, name: hook}}
`
	}
	const svc = `apiVersion: v1
kind: Service
metadata: {name: hook, namespace: sys}
spec: {selector: {app: hook}, ports: [{port: 443}]}
`
	workload := func(kind, replicas string) string {
		return `apiVersion: apps/v1
kind: ` + kind + `
metadata: {name: hook, namespace: sys}
spec:
  ` + replicas + `
  selector: {matchLabels: {app: hook}}
  template:
    metadata: {labels: {app: hook, tier: web}}
    spec: {containers: [{name: s, image: s}]}
`
	}
	pdb := func(spec string) string {
		return `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: hook, namespace: sys}
spec: ` + spec + `
`
	}
	const hpa = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hook, namespace: sys}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: hook}
  minReplicas: 2
  maxReplicas: 5
`
	kyverno := func(replicas string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: kyverno-admission-controller
  namespace: kyverno
  labels: {app.kubernetes.io/part-of: kyverno, app.kubernetes.io/component: admission-controller}
spec:
  ` + replicas + `
  selector: {matchLabels: {app: k}}
  template:
    metadata: {labels: {app: k}}
    spec: {containers: [{name: k, image: k}]}
`
	}
	policy := func(failurePolicy string) string {
		return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  ` + failurePolicy + `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {labels: {team: "?*"}}}}
`
	}
	app := func(source, helm string) string {
		return `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: engine, namespace: argocd}
spec:
  project: default
  source:
    ` + source + `
    helm:
      ` + helm + `
  destination: {server: https://kubernetes.default.svc, namespace: engine}
`
	}
	tests := []struct {
		name string
		docs []string
		want []string // message substrings, one per finding
	}{
		{"validating, replicas unset", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "")},
			[]string{`webhooks[0] "hook.example.com" fails closed and its service sys/hook is served by Deployment sys/hook (testdata.yaml:`, "with 1 replica (spec.replicas unset)"}},
		{"mutating, one replica, a StatefulSet", []string{hook("MutatingWebhookConfiguration", "Fail"), svc, workload("StatefulSet", "replicas: 1")},
			[]string{"served by StatefulSet sys/hook", "with 1 replica(s)"}},
		{"two replicas and no PodDisruptionBudget", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2")},
			[]string{"served by Deployment sys/hook", "with 2 replica(s) and no PodDisruptionBudget: a node drain or cluster upgrade may evict all of them at once"}},
		{"two replicas, minAvailable 1", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 1, selector: {matchLabels: {app: hook}}}")}, nil},
		{"two replicas, maxUnavailable 1", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{maxUnavailable: 1, selector: {matchLabels: {app: hook}}}")}, nil},
		{"two replicas, minAvailable 50% (rounded up: 1)", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 50%, selector: {matchLabels: {app: hook}}}")}, nil},
		{"three replicas, minAvailable 10% (rounded up: 1)", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 3"),
			pdb("{minAvailable: 10%, selector: {matchLabels: {app: hook}}}")}, nil},
		{"two replicas, minAvailable 0", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 0, selector: {matchLabels: {app: hook}}}")},
			[]string{"with 2 replica(s) and PodDisruptionBudget sys/hook (minAvailable: 0), which lets all of them be evicted at once"}},
		{"two replicas, maxUnavailable 2", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{maxUnavailable: 2, selector: {matchLabels: {app: hook}}}")},
			[]string{"PodDisruptionBudget sys/hook (maxUnavailable: 2), which lets all of them be evicted at once"}},
		{"three replicas, maxUnavailable 100%", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 3"),
			pdb("{maxUnavailable: 100%, selector: {matchLabels: {app: hook}}}")},
			[]string{"(maxUnavailable: 100%), which lets all of them be evicted at once"}},
		{"two replicas, maxUnavailable 60% (rounded up: 2)", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{maxUnavailable: 60%, selector: {matchLabels: {app: hook}}}")},
			[]string{"(maxUnavailable: 60%), which lets all of them be evicted at once"}},
		{"two replicas, a budget with neither field keeps none", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{selector: {matchLabels: {app: hook}}}")},
			[]string{"(neither minAvailable nor maxUnavailable), which lets all of them be evicted at once"}},
		{"two replicas, a budget selecting other Pods", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 1, selector: {matchLabels: {app: other}}}")},
			[]string{"and no PodDisruptionBudget"}},
		{"two replicas, a budget in another namespace", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			strings.Replace(pdb("{minAvailable: 1, selector: {matchLabels: {app: hook}}}"), "namespace: sys", "namespace: other", 1)},
			[]string{"and no PodDisruptionBudget"}},
		{"two replicas, a budget with an empty selector selects every Pod of its namespace", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 1, selector: {}}")}, nil},
		{"two replicas, a budget selecting by expression", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 1, selector: {matchExpressions: [{key: tier, operator: In, values: [web]}]}}")}, nil},
		{"two replicas, two budgets: the eviction API refuses every eviction", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2"),
			pdb("{minAvailable: 0, selector: {matchLabels: {app: hook}}}"),
			strings.Replace(pdb("{minAvailable: 0, selector: {matchLabels: {tier: web}}}"), "name: hook", "name: hook-2", 1)}, nil},
		{"one replica and a budget that keeps it: drains wait", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 1"),
			pdb("{minAvailable: 1, selector: {matchLabels: {app: hook}}}")},
			[]string{"with 1 replica(s); PodDisruptionBudget sys/hook (minAvailable: 1) lets no eviction through, so node drains wait on it instead"}},
		{"one replica and a budget that lets it go", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 1"),
			pdb("{maxUnavailable: 1, selector: {matchLabels: {app: hook}}}")},
			[]string{"with 1 replica(s)"}},
		{"a HorizontalPodAutoscaler keeps two, with a budget", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 1"), hpa,
			pdb("{maxUnavailable: 1, selector: {matchLabels: {app: hook}}}")}, nil},
		{"a HorizontalPodAutoscaler keeps two, no budget", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 1"), hpa},
			[]string{"with 2 replica(s) at least (HorizontalPodAutoscaler minReplicas) and no PodDisruptionBudget"}},
		{"fails open, two replicas and no budget", []string{hook("ValidatingWebhookConfiguration", "Ignore"), svc, workload("Deployment", "replicas: 2")}, nil},
		{"fails open", []string{hook("ValidatingWebhookConfiguration", "Ignore"), svc, workload("Deployment", "")}, nil},
		{"no Service in the input", []string{hook("ValidatingWebhookConfiguration", "Fail"), workload("Deployment", "")}, nil},
		{"Kyverno with a fail-closed ClusterPolicy", []string{kyverno(""), policy("")},
			[]string{"ClusterPolicy require-labels fail closed (Kyverno registers its webhooks for them with failurePolicy Fail) and Kyverno's admission controller runs with 1 replica (spec.replicas unset)"}},
		{"Kyverno with a fail-open ClusterPolicy", []string{kyverno(""), policy("failurePolicy: Ignore")}, nil},
		{"Kyverno with three replicas and no budget", []string{kyverno("replicas: 3"), policy("")},
			[]string{"Kyverno's admission controller runs with 3 replica(s) and no PodDisruptionBudget"}},
		{"Kyverno with three replicas and a budget", []string{kyverno("replicas: 3"), policy(""),
			"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: k, namespace: kyverno}\nspec: {minAvailable: 1, selector: {matchLabels: {app: k}}}\n"}, nil},
		{"Kyverno's chart by Argo CD, replicas unset", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1", "valuesObject: {}")},
			[]string{`Application "engine" installs Kyverno's Helm chart`, "admission controller at 1 replica (admissionController.replicas unset"}},
		{"Kyverno's chart by Argo CD, values text with 3", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"values: |\n        admissionController:\n          replicas: 3")}, nil},
		{"Gatekeeper's chart failing closed with one replica", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {replicas: 1, validatingWebhookFailurePolicy: Fail}")},
			[]string{`installs Gatekeeper's Helm chart with validatingWebhookFailurePolicy: Fail and replicas: 1`}},
		{"Gatekeeper's chart failing open with one replica", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {replicas: 1}")}, nil},
		// Argo CD passes valuesObject instead of values, never both.
		{"Kyverno's chart: valuesObject replaces values", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"values: |\n        admissionController:\n          replicas: 3\n      valuesObject: {admissionController: {replicas: 1}}")},
			[]string{"admission controller at 1 replica(s) (admissionController.replicas)"}},
		{"Kyverno's chart: a parameter sets the replicas", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"parameters: [{name: admissionController.replicas, value: \"3\"}]")}, nil},
		{"Gatekeeper's chart: parameters fail closed with one replica", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"parameters: [{name: replicas, value: \"1\"}, {name: mutatingWebhookFailurePolicy, value: Fail}]")},
			[]string{`installs Gatekeeper's Helm chart with mutatingWebhookFailurePolicy: Fail and replicas: 1`}},
		// The charts' PodDisruptionBudgets, read from the values as their
		// templates write them.
		{"Kyverno's chart: three replicas, the budget lets all go", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"valuesObject: {admissionController: {replicas: 3, podDisruptionBudget: {minAvailable: null, maxUnavailable: 3}}}")},
			[]string{"admission controller at 3 replica(s) (admissionController.replicas) and the chart's PodDisruptionBudget with maxUnavailable: 3, which lets all of them be evicted at once"}},
		// The chart's minAvailable (1) stays beside it: the chart refuses
		// to render both, which is not this rule's finding.
		{"Kyverno's chart: maxUnavailable beside the chart's minAvailable", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"valuesObject: {admissionController: {replicas: 3, podDisruptionBudget: {maxUnavailable: 3}}}")}, nil},
		{"Kyverno's chart: three replicas, maxUnavailable 100%", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"valuesObject: {admissionController: {replicas: 3, podDisruptionBudget: {minAvailable: 0, maxUnavailable: \"100%\"}}}")},
			[]string{"PodDisruptionBudget with maxUnavailable: 100%"}},
		{"Kyverno's chart: two replicas, maxUnavailable 1 keeps one", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"valuesObject: {admissionController: {replicas: 2, podDisruptionBudget: {minAvailable: null, maxUnavailable: 1}}}")}, nil},
		// `default 1` turns a minAvailable of 0 into 1.
		{"Kyverno's chart: minAvailable 0 is the chart's 1", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"valuesObject: {admissionController: {replicas: 3, podDisruptionBudget: {minAvailable: 0}}}")}, nil},
		{"Kyverno's chart: minAvailable 0% keeps none", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"valuesObject: {admissionController: {replicas: 3, podDisruptionBudget: {minAvailable: \"0%\"}}}")},
			[]string{"PodDisruptionBudget with minAvailable: 0%"}},
		{"Gatekeeper's chart: default replicas, fail closed, the budget keeps none", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {validatingWebhookFailurePolicy: Fail, pdb: {controllerManager: {minAvailable: 0}}}")},
			[]string{"installs Gatekeeper's Helm chart with validatingWebhookFailurePolicy: Fail, 3 replicas and the chart's PodDisruptionBudget with minAvailable: 0, which lets all of them be evicted at once"}},
		{"Gatekeeper's chart: minAvailable removed", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {replicas: 2, mutatingWebhookFailurePolicy: Fail, pdb: {controllerManager: {minAvailable: null}}}")},
			[]string{"2 replicas and the chart's PodDisruptionBudget with no minAvailable (pdb.controllerManager.minAvailable: null)"}},
		{"Gatekeeper's chart: fail closed, the chart's budget", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {replicas: 2, validatingWebhookFailurePolicy: Fail, pdb: {controllerManager: {minAvailable: \"50%\"}}}")}, nil},
		{"Gatekeeper's chart: fails open, the budget keeps none", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {pdb: {controllerManager: {minAvailable: 0}}}")}, nil},
		// Each source's values are its own: another source's values do not
		// reach Gatekeeper's chart.
		{"Gatekeeper's chart: another source's values", []string{`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: engine, namespace: argocd}
spec:
  project: default
  sources:
  - {repoURL: https://open-policy-agent.github.io/gatekeeper/charts, chart: gatekeeper, targetRevision: 3.23.1, helm: {valuesObject: {replicas: 3}}}
  - {repoURL: https://charts.example.com, chart: other, targetRevision: 1.0.0, helm: {valuesObject: {replicas: 1, validatingWebhookFailurePolicy: Fail}}}
  destination: {server: https://kubernetes.default.svc, namespace: engine}
`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "testdata.yaml")
			if err := os.WriteFile(path, []byte(strings.Join(tt.docs, "---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := manifest.LoadPaths(context.Background(), []string{path}, manifest.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			fs, err := checkFailClosedSingleReplica(context.Background(), &Input{Objects: objs})
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != min(len(tt.want), 1) {
				t.Fatalf("findings %+v, want one containing %q", fs, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.ReplaceAll(fs[0].Message, filepath.Dir(path)+"/", ""), w) {
					t.Errorf("message %q does not contain %q", fs[0].Message, w)
				}
			}
		})
	}
}
