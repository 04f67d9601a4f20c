package kyverno_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno"
)

func obj(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func objs(t *testing.T, docs ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, d := range docs {
		for _, part := range strings.Split(d, "\n---\n") {
			if strings.TrimSpace(part) != "" {
				out = append(out, obj(t, part))
			}
		}
	}
	return out
}

const namespaces = `
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {kubernetes.io/metadata.name: apps}}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system, labels: {kubernetes.io/metadata.name: kube-system}}
`

const addLabel = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-team}
spec:
  rules:
  - name: team-label
    match:
      any:
      - resources: {kinds: [Deployment]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels: {team: platform}
`

const requireApp = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-app}
spec:
  validationFailureAction: Enforce
  rules:
  - name: app-label
    match:
      any:
      - resources: {kinds: [ConfigMap]}
    validate:
      message: "the label app is required"
      pattern:
        metadata:
          labels: {app: "?*"}
`

const exceptLegacy = `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: legacy, namespace: apps}
spec:
  exceptions:
  - policyName: require-app
    ruleNames: [app-label]
  match:
    any:
    - resources: {kinds: [ConfigMap], names: [legacy-*]}
`

func deployment(ns string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`
}

func configMap(name string, labels string) string {
	return `
apiVersion: v1
kind: ConfigMap
metadata: {name: ` + name + `, namespace: apps, labels: {` + labels + `}}
`
}

func newChain(t *testing.T, cluster ...string) *admission.Chain {
	t.Helper()
	eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
	t.Cleanup(eng.Close)
	state, err := admission.NewState(objs(t, cluster...)...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(testContext(t), state, admission.Options{Engines: []admission.PolicyEngine{eng}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	return chain
}

func TestAdmission(t *testing.T) {
	chain := newChain(t, namespaces, addLabel, requireApp, exceptLegacy)
	tests := []struct {
		name       string
		object     string
		allowed    bool
		message    string
		labels     map[string]any
		changeBy   string
		noLabelKey string
	}{
		{name: "mutate adds the label", object: deployment("apps"), allowed: true,
			labels: map[string]any{"team": "platform"}, changeBy: "webhook mutate.kyverno.svc-fail"},
		{name: "resource filter skips kube-system", object: deployment("kube-system"), allowed: true, noLabelKey: "team"},
		{name: "enforce denies", object: configMap("c", "k: v"), allowed: false,
			message: "the label app is required"},
		{name: "enforce allows", object: configMap("c", "app: a"), allowed: true},
		{name: "exception lets through", object: configMap("legacy-1", "k: v"), allowed: true},
	}
	for _, tt := range tests {
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
				if labels[k] != v {
					t.Errorf("label %s = %v, want %v (labels %v)", k, labels[k], v, labels)
				}
			}
			if _, ok := labels[tt.noLabelKey]; tt.noLabelKey != "" && ok {
				t.Errorf("label %s set, want none: Kyverno's resource filters skip kube-system", tt.noLabelKey)
			}
			if tt.changeBy != "" {
				found := false
				for _, c := range res.Changes {
					if c.By == tt.changeBy {
						found = true
					}
				}
				if !found {
					t.Errorf("changes %+v, want one by %s", res.Changes, tt.changeBy)
				}
			}
		})
	}
}

func TestWebhookConfigurations(t *testing.T) {
	chain := newChain(t, namespaces, addLabel, requireApp)
	mwc, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, "", "kyverno-resource-mutating-webhook-cfg")
	if !ok {
		t.Fatal("no kyverno-resource-mutating-webhook-cfg in the state")
	}
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	var names []string
	for _, h := range hooks {
		m := h.(map[string]any)
		names = append(names, m["name"].(string))
		if m["name"] == "mutate.kyverno.svc-fail" {
			if m["reinvocationPolicy"] != "IfNeeded" {
				t.Errorf("reinvocationPolicy = %v, want IfNeeded", m["reinvocationPolicy"])
			}
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			if path != "/mutate/fail" {
				t.Errorf("path = %q, want /mutate/fail", path)
			}
			rules, _ := m["rules"].([]any)
			if len(rules) == 0 || !strings.Contains(strings.Join(toStrings(rules[0].(map[string]any)["resources"]), ","), "deployments") {
				t.Errorf("rules = %v, want deployments", rules)
			}
		}
	}
	if !contains(names, "mutate.kyverno.svc-fail") {
		t.Errorf("webhooks %v, want mutate.kyverno.svc-fail", names)
	}
	if _, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}, "", "kyverno-resource-validating-webhook-cfg"); !ok {
		t.Error("no kyverno-resource-validating-webhook-cfg in the state")
	}
	if _, ok := chain.State().Get(k8sschema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, "", "clusterpolicies.kyverno.io"); !ok {
		t.Error("Kyverno's CRD clusterpolicies.kyverno.io is not in the state")
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, s.(string))
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
