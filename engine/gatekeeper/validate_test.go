package gatekeeper_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/internal/certs"
)

// requiredLabels is K8sRequiredLabels from the Gatekeeper policy library
// (github.com/open-policy-agent/gatekeeper-library, Apache-2.0), shortened.
const requiredLabels = `
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8srequiredlabels}
spec:
  crd:
    spec:
      names: {kind: K8sRequiredLabels}
      validation:
        openAPIV3Schema:
          type: object
          properties:
            labels: {type: array, items: {type: string}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8srequiredlabels
      violation[{"msg": msg, "details": {"missing_labels": missing}}] {
        provided := {label | input.review.object.metadata.labels[label]}
        required := {label | label := input.parameters.labels[_]}
        missing := required - provided
        count(missing) > 0
        msg := sprintf("you must provide labels: %v", [missing])
      }
`

func constraint(name, action string) string {
	return `
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata: {name: ` + name + `}
spec:
  enforcementAction: ` + action + `
  match:
    kinds: [{apiGroups: [""], kinds: [ConfigMap]}]
  parameters: {labels: [owner]}
`
}

const configMap = `
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: %s, labels: {app: x}}
`

func TestValidation(t *testing.T) {
	tests := []struct {
		name      string
		policies  string
		namespace string
		object    string
		allowed   bool
		message   string
		warnings  []string
	}{{
		name:      "deny",
		policies:  constraint("must-have-owner", "deny"),
		namespace: "apps",
		message:   `admission webhook "validation.gatekeeper.sh" denied the request: [must-have-owner] you must provide labels: {"owner"}`,
	}, {
		name:      "warn",
		policies:  constraint("should-have-owner", "warn"),
		namespace: "apps",
		allowed:   true,
		warnings:  []string{`[should-have-owner] you must provide labels: {"owner"}`},
	}, {
		name:      "dryrun only reports in audit",
		policies:  constraint("owner-audit", "dryrun"),
		namespace: "apps",
		allowed:   true,
	}, {
		name:      "deny and warn together",
		policies:  constraint("a-deny", "deny") + "\n---\n" + constraint("b-warn", "warn"),
		namespace: "apps",
		message:   `admission webhook "validation.gatekeeper.sh" denied the request: [a-deny] you must provide labels: {"owner"}`,
		warnings:  []string{`[b-warn] you must provide labels: {"owner"}`},
	}, {
		name:      "a namespace labelled admission.gatekeeper.sh/ignore is not validated",
		policies:  constraint("must-have-owner", "deny"),
		namespace: "ignored",
		allowed:   true,
	}, {
		name: "Config excludes a namespace from the validating webhook",
		policies: constraint("must-have-owner", "deny") + `
---
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  match:
  - processes: ["*"]
    excludedNamespaces: [excluded]
`,
		namespace: "excluded",
		allowed:   true,
	}, {
		name:    "only exempt namespaces may carry the ignore label",
		object:  "apiVersion: v1\nkind: Namespace\nmetadata: {name: sneaky, labels: {admission.gatekeeper.sh/ignore: x}}\n",
		message: `admission webhook "check-ignore-label.gatekeeper.sh" denied the request: Only exempt namespace can have the admission.gatekeeper.sh/ignore label`,
	}, {
		name: "Gatekeeper's webhook refuses a mutator it cannot build",
		object: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [ConfigMap], versions: [v1]}]
  location: metadata.labels.x
  parameters: {assign: {value: y}}
`,
		message: `admission webhook "validation.gatekeeper.sh" denied the request: `,
	}, {
		name:    "an unknown enforcementAction is refused",
		object:  constraint("odd", "block"),
		message: `admission webhook "validation.gatekeeper.sh" denied the request: `,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain := newChain(t, namespaces+"\n---\n"+requiredLabels+"\n---\n"+tc.policies)
			doc := tc.object
			if doc == "" {
				doc = strings.ReplaceAll(configMap, "%s", tc.namespace)
			}
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, doc)[0]})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%s), want %v", res.Allowed, res.Message, tc.allowed)
			}
			if !tc.allowed && !strings.HasPrefix(res.Message, tc.message) {
				t.Errorf("message = %q, want it to start with %q", res.Message, tc.message)
			}
			if diff := cmp.Diff(tc.warnings, res.Warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConstraintKinds: the CRD Gatekeeper generates for a template makes
// its constraints known kinds, validated by their parameters' schema.
func TestConstraintKinds(t *testing.T) {
	chain := newChain(t, namespaces+"\n---\n"+requiredLabels)
	res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, `
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata: {name: wrong}
spec:
  parameters: {labels: "owner"}
`)[0]})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed || !strings.Contains(res.Message, "spec.parameters.labels") {
		t.Errorf("allowed=%v message=%q, want a schema error on spec.parameters.labels", res.Allowed, res.Message)
	}
}

// celTemplate is a ConstraintTemplate with Gatekeeper's CEL code and,
// when rego is set, Rego code that answers differently, so which driver
// ran shows in the message.
func celTemplate(rego bool) string {
	s := `
---
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8scelrequiredowner}
spec:
  crd:
    spec:
      names: {kind: K8sCELRequiredOwner}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
          message: "an owner label is required (CEL)"
`
	if rego {
		s += `    rego: |
      package k8scelrequiredowner
      violation[{"msg": "an owner label is required (Rego)"}] {
        not input.review.object.metadata.labels.owner
      }
`
	}
	return s + `---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sCELRequiredOwner
metadata: {name: owner}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [ConfigMap]}]
`
}

// TestCELTemplate: templates with Gatekeeper's CEL code run in its CEL
// driver (k8scel, the local copy in internal/k8scel), which Gatekeeper
// ranks before Rego: a template with both answers with its CEL.
func TestCELTemplate(t *testing.T) {
	const owned = `apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: apps, labels: {owner: me}}
`
	tests := []struct {
		name, template, object string
		want                   string // the denial, "" when allowed
	}{
		{"CEL only, denied", celTemplate(false), strings.ReplaceAll(configMap, "%s", "apps"),
			`admission webhook "validation.gatekeeper.sh" denied the request: [owner] an owner label is required (CEL)`},
		{"CEL only, allowed", celTemplate(false), owned, ""},
		{"CEL before Rego", celTemplate(true), strings.ReplaceAll(configMap, "%s", "apps"),
			`admission webhook "validation.gatekeeper.sh" denied the request: [owner] an owner label is required (CEL)`},
		{"not matched", celTemplate(false), "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: apps}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain := newChain(t, namespaces+tc.template)
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, tc.object)[0]})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if !res.Allowed {
				got = res.Message
			}
			if got != tc.want {
				t.Errorf("answer = %q, want %q", got, tc.want)
			}
			if len(res.Unpredictable) != 0 {
				t.Errorf("unpredictable = %q", res.Unpredictable)
			}
		})
	}
}

// TestProviderValidation: Gatekeeper's webhook refuses a Provider its
// provider cache would not take (validateProvider).
func TestProviderValidation(t *testing.T) {
	ca, err := certs.NewCA("provider CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	provider := func(spec string) string {
		return "apiVersion: externaldata.gatekeeper.sh/v1beta1\nkind: Provider\nmetadata: {name: tags}\nspec: " + spec + "\n"
	}
	tests := []struct {
		name, object string
		want         string // the denial, "" when allowed
	}{
		{"HTTP", provider(`{url: "http://tags.example:8090/validate", timeout: 3}`), "only HTTPS scheme is supported for Providers"},
		{"HTTPS without a caBundle", provider(`{url: "https://tags.example:8090/validate", timeout: 3}`), "caBundle should be set for HTTPS scheme"},
		{"a caBundle that is not a certificate", provider(`{url: "https://tags.example:8090/validate", timeout: 3, caBundle: "bm90IGEgY2VydA=="}`), "bad caBundle"},
		{"HTTPS with a CA", provider(`{url: "https://tags.example:8090/validate", timeout: 3, caBundle: "` + base64.StdEncoding.EncodeToString(ca.PEM) + `"}`), ""},
	}
	chain := newChain(t, namespaces)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, tc.object)[0]})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !res.Allowed {
					t.Errorf("denied: %s", res.Message)
				}
				return
			}
			want := `admission webhook "validation.gatekeeper.sh" denied the request: ` + tc.want
			if res.Allowed || res.Message != want {
				t.Errorf("allowed=%v %q, want %q", res.Allowed, res.Message, want)
			}
		})
	}
}
