package kyverno_test

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// imageSize reads an image's manifest from its registry: offline, the rule
// errors naming the image, and Enforce blocks the write, where a helper
// with a real registry client would reach the internet from truce's machine.
const imageSize = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: image-size}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-image
    match:
      any:
      - resources: {kinds: [ConfigMap]}
    context:
    - name: imageData
      imageRegistry:
        reference: "registry.example.com/web:1.0"
    validate:
      message: "the image is too large"
      deny:
        conditions:
          any:
          - key: "{{ imageData.manifest.config.size }}"
            operator: GreaterThan
            value: 1000000000
`

// globalDeployments reads a global context entry, which truce does not
// fill offline.
const globalDeployments = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: gctx-check}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-gctx
    match:
      any:
      - resources: {kinds: [Secret]}
    context:
    - name: deployments
      globalReference:
        name: deployments-cache
        jmesPath: "length(@)"
    validate:
      message: "too many deployments"
      deny:
        conditions:
          any:
          - {key: "{{ deployments }}", operator: GreaterThan, value: 10}
`

// serviceCall asks an external service, which truce does not call.
const serviceCall = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ask-checker}
spec:
  validationFailureAction: Enforce
  rules:
  - name: ask
    match:
      any:
      - resources: {kinds: [ServiceAccount]}
    context:
    - name: verdict
      apiCall:
        method: GET
        service: {url: "https://checker.example/check"}
        jmesPath: allowed
    validate:
      message: "the checker refuses"
      deny:
        conditions:
          any:
          - {key: "{{ verdict }}", operator: Equals, value: false}
`

// apiPathCall reads an API server path, and configMapLookup a ConfigMap,
// which truce does not send the helper: Kyverno answers with not found or
// the entry's default, whatever the cluster holds.
const apiPathCall = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: count-services}
spec:
  validationFailureAction: Enforce
  rules:
  - name: count
    match:
      any:
      - resources: {kinds: [Service]}
    context:
    - name: services
      apiCall:
        urlPath: "/api/v1/namespaces/{{ request.namespace }}/services"
        jmesPath: "items | length(@)"
        default: 0
    validate:
      message: "too many services"
      deny:
        conditions:
          any:
          - {key: "{{ services }}", operator: GreaterThan, value: 10}
`

const configMapLookup = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: allowed-roles}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check
    match:
      any:
      - resources: {kinds: [Role]}
    context:
    - name: settings
      configMap: {name: role-settings, namespace: kyverno}
    validate:
      message: "roles are closed"
      deny:
        conditions:
          any:
          - {key: "{{ settings.data.open || 'true' }}", operator: Equals, value: "false"}
`

// What a legacy rule reaches for offline fails the rule as Kyverno words
// it, and is named in Result.Unpredictable, and so is what it reads from
// the cluster that truce does not send (an API path, a ConfigMap), even
// when Kyverno answers without an error; a write no such rule matches
// has none.
func TestOfflineUnpredictable(t *testing.T) {
	chain := newChain(t, namespaces, globalDeployments, serviceCall, apiPathCall, configMapLookup)
	tests := []struct {
		name, object, unpredictable string
	}{
		{name: "global context", object: "{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: apps}}",
			unpredictable: `Kyverno ClusterPolicy gctx-check rule check-gctx: `},
		{name: "service call", object: "{apiVersion: v1, kind: ServiceAccount, metadata: {name: sa, namespace: apps}}",
			unpredictable: `Kyverno ClusterPolicy ask-checker rule ask: `},
		{name: "API path", object: "{apiVersion: v1, kind: Service, metadata: {name: web, namespace: apps}, spec: {ports: [{port: 80}]}}",
			unpredictable: `Kyverno ClusterPolicy count-services rule count: context entry "services" reads /api/v1/namespaces/{{ request.namespace }}/services from the API server, which truce does not send Kyverno offline: Kyverno answered without it`},
		{name: "ConfigMap", object: "{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: apps}}",
			unpredictable: `Kyverno ClusterPolicy allowed-roles rule check: context entry "settings" reads the ConfigMap kyverno/role-settings, which truce does not send Kyverno offline: Kyverno answered without it`},
		{name: "neither", object: configMap("c", "app: a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, tt.object)})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(res.Unpredictable, "\n")
			if tt.unpredictable == "" {
				if got != "" || !res.Allowed {
					t.Errorf("allowed %v (%s), unpredictable %q; want allowed, none", res.Allowed, res.Message, got)
				}
				return
			}
			if !strings.Contains(got, tt.unpredictable) {
				t.Errorf("unpredictable %q, want %q…", got, tt.unpredictable)
			}
			t.Logf("answer: allowed %v: %s; unpredictable %s", res.Allowed, res.Message, got)
		})
	}
}

func TestRegistryOffline(t *testing.T) {
	chain := newChain(t, namespaces, imageSize)
	res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, configMap("c", "app: a"))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed {
		t.Fatalf("allowed; want the rule's error to block the write")
	}
	for _, want := range []string{"registry.example.com/web:1.0", "registries are not contacted"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q, want it to contain %q", res.Message, want)
		}
	}
	// Kyverno's answer stands; truce names what it could not predict.
	want := "webhook validate.kyverno.svc-fail: Kyverno ClusterPolicy image-size rule check-image: "
	if len(res.Unpredictable) != 1 || !strings.HasPrefix(res.Unpredictable[0], want) ||
		!strings.Contains(res.Unpredictable[0], "registry.example.com/web:1.0") {
		t.Errorf("unpredictable %q, want one entry %q… naming the image", res.Unpredictable, want)
	}
}
