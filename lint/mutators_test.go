package lint

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/manifest"
)

func mapPolicy(name, reinvocation, expression string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %s}
spec:
  failurePolicy: Fail
  reinvocationPolicy: %s
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: '%s'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %s}
spec: {policyName: %s}
---
`, name, reinvocation, expression, name, name)
}

// webDeployment is a workload for the policies to run on.
const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
`

// TestMutatorRulesOnlyReportOrderDependence: policies that touch the same
// map or write the same value do not depend on their order.
func TestMutatorRulesOnlyReportOrderDependence(t *testing.T) {
	annotation := func(k, v string) string {
		return fmt.Sprintf(`Object{metadata: Object.metadata{annotations: {"%s": "%s"}}}`, k, v)
	}
	label := func(k, v string) string {
		return fmt.Sprintf(`Object{metadata: Object.metadata{labels: {"%s": "%s"}}}`, k, v)
	}
	for _, tc := range []struct {
		name  string
		docs  string
		rule  string
		found bool
	}{
		{"different annotations do not compete", mapPolicy("a", "Never", annotation("team", "x")) + mapPolicy("b", "Never", annotation("cost", "y")), "mutating-policies-compete", false},
		{"the same label, the same value, does not compete", mapPolicy("a", "Never", label("tier", "x")) + mapPolicy("b", "Never", label("tier", "x")), "mutating-policies-compete", false},
		{"the same label, other values, competes", mapPolicy("a", "Never", label("tier", "x")) + mapPolicy("b", "Never", label("tier", "y")), "mutating-policies-compete", true},
		{"the same label, the same value, reads nothing", mapPolicy("a", "Never", label("tier", "x")) + mapPolicy("b", "Never", label("tier", "x")), "mutating-policy-never-reinvoked-reads-others", false},
		{"independent labels read nothing", mapPolicy("a", "Never", label("tier", "x")) + mapPolicy("b", "Never", label("team", "y")), "mutating-policy-never-reinvoked-reads-others", false},
		{"an Argo CD Application (no CRD) does not hide a non-idempotent policy",
			mapPolicy("a", "IfNeeded", `Object{spec: Object.spec{replicas: object.spec.replicas + 1}}`) + webDeployment + application,
			"mutating-policy-not-idempotent", true},
		{"a nameless sample is no error", mapPolicy("a", "Never", label("tier", "x")) +
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: run-, namespace: default}\n", "mutating-policies-compete", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := manifest.DefaultOptions()
			opts.Stdin = strings.NewReader(tc.docs)
			objs, err := manifest.LoadPaths(context.Background(), []string{"-"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := Run(context.Background(), &Input{Objects: objs}, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got := len(findingsOf(findings, tc.rule)) > 0; got != tc.found {
				t.Fatalf("%s found: %v, want %v; findings: %+v", tc.rule, got, tc.found, findings)
			}
		})
	}
}

// TestRememberedProbeResults: the mutator rules find the same with each
// unit's results on the probes remembered as with every review run again.
func TestRememberedProbeResults(t *testing.T) {
	label := func(k, v string) string {
		return fmt.Sprintf(`Object{metadata: Object.metadata{labels: {"%s": "%s"}}}`, k, v)
	}
	docs := mapPolicy("a", "Never", label("tier", "x")) + mapPolicy("b", "Never", label("tier", "y")) +
		mapPolicy("c", "Never", `Object{metadata: Object.metadata{labels: {"copy": object.metadata.?labels[?"tier"].orValue("none")}}}`) +
		mapPolicy("d", "IfNeeded", `Object{spec: Object.spec{replicas: object.spec.replicas + 1}}`) + webDeployment
	run := func(remember bool) []Finding {
		t.Helper()
		rememberProbes = remember
		defer func() { rememberProbes = true }()
		opts := manifest.DefaultOptions()
		opts.Stdin = strings.NewReader(docs)
		objs, err := manifest.LoadPaths(context.Background(), []string{"-"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		findings, err := Run(context.Background(), &Input{Objects: objs}, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		return findings
	}
	fresh, remembered := run(false), run(true)
	for _, rule := range []string{"mutating-policies-compete", "mutating-policy-never-reinvoked-reads-others", "mutating-policy-not-idempotent"} {
		if len(findingsOf(fresh, rule)) == 0 {
			t.Errorf("no %s finding: the test exercises nothing", rule)
		}
	}
	if diff := cmp.Diff(fresh, remembered); diff != "" {
		t.Errorf("findings differ (-fresh +remembered):\n%s", diff)
	}
}
