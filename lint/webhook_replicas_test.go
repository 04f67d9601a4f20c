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
		{"two replicas", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 2")}, nil},
		{"a HorizontalPodAutoscaler keeps two", []string{hook("ValidatingWebhookConfiguration", "Fail"), svc, workload("Deployment", "replicas: 1"), hpa}, nil},
		{"fails open", []string{hook("ValidatingWebhookConfiguration", "Ignore"), svc, workload("Deployment", "")}, nil},
		{"no Service in the input", []string{hook("ValidatingWebhookConfiguration", "Fail"), workload("Deployment", "")}, nil},
		{"Kyverno with a fail-closed ClusterPolicy", []string{kyverno(""), policy("")},
			[]string{"Kyverno's admission controller runs with 1 replica (spec.replicas unset) while ClusterPolicy require-labels fail closed"}},
		{"Kyverno with a fail-open ClusterPolicy", []string{kyverno(""), policy("failurePolicy: Ignore")}, nil},
		{"Kyverno with three replicas", []string{kyverno("replicas: 3"), policy("")}, nil},
		{"Kyverno's chart by Argo CD, replicas unset", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1", "valuesObject: {}")},
			[]string{`Application "engine" installs Kyverno's Helm chart`, "admission controller at 1 replica (admissionController.replicas unset"}},
		{"Kyverno's chart by Argo CD, values text with 3", []string{app("repoURL: https://kyverno.github.io/kyverno/\n    chart: kyverno\n    targetRevision: 3.7.1",
			"values: |\n        admissionController:\n          replicas: 3")}, nil},
		{"Gatekeeper's chart failing closed with one replica", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {replicas: 1, validatingWebhookFailurePolicy: Fail}")},
			[]string{`installs Gatekeeper's Helm chart with validatingWebhookFailurePolicy: Fail and replicas: 1`}},
		{"Gatekeeper's chart failing open with one replica", []string{app("repoURL: https://open-policy-agent.github.io/gatekeeper/charts\n    chart: gatekeeper\n    targetRevision: 3.23.1",
			"valuesObject: {replicas: 1}")}, nil},
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
