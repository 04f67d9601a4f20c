package kyverno_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
)

// conformance reads a policy of Kyverno's conformance tests
// (testdata/conformance/README.md).
func conformance(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "conformance", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const celNamespaces = `
apiVersion: v1
kind: Namespace
metadata: {name: dev, labels: {kubernetes.io/metadata.name: dev}}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {kubernetes.io/metadata.name: apps}}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system, labels: {kubernetes.io/metadata.name: kube-system}}
`

// labelledDeployment is a Deployment name in ns with labels ("k: v, …").
func labelledDeployment(name, ns, labels string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `, labels: {` + labels + `}}
spec:
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec: {containers: [{name: nginx, image: nginx}]}
`
}

// TestCELPolicies runs ValidatingPolicies, MutatingPolicies and a CEL
// PolicyException of Kyverno's conformance tests through the chain: the
// answers are the ones those tests expect of a real Kyverno.
func TestCELPolicies(t *testing.T) {
	type tc struct {
		name     string
		object   string
		allowed  bool
		message  string
		labels   map[string]any
		changeBy string
		// unpredictable is in Result.Unpredictable; empty, it is empty.
		unpredictable string
	}
	suites := []struct {
		name    string
		cluster []string
		cases   []tc
	}{{
		name: "validate and mutate",
		cluster: []string{celNamespaces,
			conformance(t, "validating-policies_apply-v1"),
			conformance(t, "mutating-policies_admission_jsonpatch"),
			conformance(t, "mutating-policies_admission_applyconfiguration")},
		cases: []tc{
			{name: "ValidatingPolicy v1 denies with its message", object: labelledDeployment("web", "apps", "env: dev"),
				message: "Deployment labels must be env=prod"},
			{name: "ValidatingPolicy allows", object: labelledDeployment("web", "apps", "env: prod"), allowed: true},
			{name: "MutatingPolicy JSONPatch", object: labelledDeployment("web", "dev", "env: prod"), allowed: true,
				labels: map[string]any{"managed": "true"}, changeBy: "mpol.validate.kyverno.svc"},
			{name: "MutatingPolicy ApplyConfiguration", object: labelledDeployment("web", "applyconfiguration", "env: prod"), allowed: true,
				labels: map[string]any{"foo": "bar"}, changeBy: "mpol.validate.kyverno.svc"},
			{name: "match conditions keep other namespaces unchanged", object: labelledDeployment("web", "apps", "env: prod"), allowed: true,
				labels: map[string]any{"managed": nil, "foo": nil}},
			{name: "resource filters skip kube-system", object: labelledDeployment("web", "kube-system", "env: dev"), allowed: true},
		},
	}, {
		// Kyverno's test runs Kyverno with --allowHTTPInNamespacedPolicies
		// and expects the json-server's status code; a default install
		// refuses the call, and so does truce. A cluster-wide policy's
		// call is refused offline by the http library's allowlist, naming
		// the URL, before any lookup: truce does not guess the answer.
		name: "policies calling http",
		cluster: []string{celNamespaces, `
apiVersion: v1
kind: Namespace
metadata: {name: test-cel-http, labels: {kubernetes.io/metadata.name: test-cel-http}}
`, conformance(t, "cel_http"), `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: probe}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  variables:
  - name: probe
    expression: http.get("http://json-server.example:8080/")
  validations:
  - expression: "variables.probe.statusCode == 200"
    message: reachable
`},
		cases: []tc{
			{name: "namespaced: not allowed by default", object: "{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: test-cel-http}}",
				message: "http calls are not allowed in namespaced policies"},
			{name: "cluster-wide: refused offline", object: "{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: apps}}",
				message:       `Policy probe error: error: request failed: URL "http://json-server.example:8080/" is not permitted`,
				unpredictable: `Kyverno ValidatingPolicy probe: error: request failed: URL "http://json-server.example:8080/" is not permitted`},
			{name: "other namespaces", object: "{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}}", allowed: true},
		},
	}, {
		name: "PolicyException",
		cluster: []string{celNamespaces,
			conformance(t, "validating-policies_exceptions_exclude-deployments"),
			conformance(t, "validating-policies_exceptions_exclude-deployments-exception")},
		cases: []tc{
			{name: "denied", object: labelledDeployment("bad-deployment", "apps", "app: nginx, env: testing"),
				message: "Deployment labels must be env=prod"},
			{name: "excepted", object: labelledDeployment("skipped-deployment", "apps", "app: nginx, env: testing"), allowed: true},
		},
	}}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			chain := newChain(t, s.cluster...)
			for _, tt := range s.cases {
				t.Run(tt.name, func(t *testing.T) {
					res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, tt.object)})
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed != tt.allowed {
						t.Fatalf("allowed = %v (%s), want %v", res.Allowed, res.Message, tt.allowed)
					}
					if tt.message != "" && !strings.Contains(res.Message, tt.message) {
						t.Errorf("message = %q, want it to contain %q", res.Message, tt.message)
					}
					labels, _, _ := unstructured.NestedMap(res.Object, "metadata", "labels")
					for k, v := range tt.labels {
						if got, ok := labels[k]; v == nil && ok || v != nil && got != v {
							t.Errorf("label %s = %v, want %v (labels %v)", k, got, v, labels)
						}
					}
					if got := strings.Join(res.Unpredictable, "\n"); tt.unpredictable == "" && got != "" || !strings.Contains(got, tt.unpredictable) {
						t.Errorf("unpredictable %q, want %q", res.Unpredictable, tt.unpredictable)
					}
					if tt.changeBy != "" && !changedBy(res, tt.changeBy) {
						t.Errorf("changes %+v, want one by a webhook %s…", res.Changes, tt.changeBy)
					}
				})
			}
		})
	}
}

func changedBy(res *admission.Result, prefix string) bool {
	for _, c := range res.Changes {
		if strings.Contains(c.By, prefix) {
			return true
		}
	}
	return false
}

// The CEL kinds' webhooks are Kyverno's: one per failure policy (or per
// fine-grained policy) with the policy's name in the path, reinvocation
// Never (Kyverno leaves it unset), as its webhook controller generates them.
func TestCELWebhookConfigurations(t *testing.T) {
	chain := newChain(t, celNamespaces,
		conformance(t, "validating-policies_apply-v1"),
		conformance(t, "mutating-policies_admission_jsonpatch"))
	mwc, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, "", "kyverno-resource-mutating-webhook-cfg")
	if !ok {
		t.Fatal("no kyverno-resource-mutating-webhook-cfg")
	}
	hook := findHook(t, mwc, "mpol.validate.kyverno.svc-fail-finegrained-test-mpol-jsonpatch")
	if r, ok := hook["reinvocationPolicy"]; ok && r != "Never" {
		t.Errorf("reinvocationPolicy = %v, want Never", r)
	}
	if path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path"); path != "/mpol/test-mpol-jsonpatch" {
		t.Errorf("path = %q, want /mpol/test-mpol-jsonpatch", path)
	}
	vwc, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}, "", "kyverno-resource-validating-webhook-cfg")
	if !ok {
		t.Fatal("no kyverno-resource-validating-webhook-cfg")
	}
	hook = findHook(t, vwc, "vpol.validate.kyverno.svc-fail")
	if fp := hook["failurePolicy"]; fp != "Fail" {
		t.Errorf("failurePolicy = %v, want Fail (the policy's default)", fp)
	}
	if path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path"); path != "/vpol/check-deployment-labels" {
		t.Errorf("path = %q, want /vpol/check-deployment-labels", path)
	}
}

func findHook(t *testing.T, cfg *unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	var names []string
	for _, h := range hooks {
		m := h.(map[string]any)
		if m["name"] == name {
			return m
		}
		names = append(names, m["name"].(string))
	}
	t.Fatalf("no webhook %s in %s: %v", name, cfg.GetName(), names)
	return nil
}
