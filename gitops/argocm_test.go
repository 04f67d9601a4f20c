package gitops

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/truce-dev/truce/drift/ignore"
)

const argoCM = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
data:
  application.resourceTrackingMethod: annotation+label
  resource.compareoptions: |
    ignoreAggregatedRoles: true
    ignoreResourceStatusField: crd
  resource.customizations: |
    admissionregistration.k8s.io/MutatingWebhookConfiguration:
      ignoreDifferences: |
        jsonPointers:
        - /webhooks/0/clientConfig/caBundle
    apps/Deployment:
      ignoreDifferences: |
        jsonPointers:
        - /spec/paused
      health.lua: |
        return {}
  resource.customizations.ignoreDifferences.apps_Deployment: |
    jqPathExpressions:
    - .spec.template.spec.containers[] | select(.name == "istio-proxy")
    managedFieldsManagers:
    - kube-controller-manager
  resource.customizations.ignoreDifferences.Service: |
    jsonPointers:
    - /spec/clusterIP
    managedFieldsManagers:
    - metallb
  resource.customizations.ignoreDifferences.all: |
    managedFieldsManagers:
    - kyverno
  resource.customizations.health.cert-manager.io_Certificate: |
    return {}
`

func TestParseArgoConfig(t *testing.T) {
	cm := object(t, "argocd/argocd-cm.yaml:1", argoCM)
	params := object(t, "argocd/params.yaml:1", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cmd-params-cm\ndata:\n  controller.diff.server.side: \"true\"\n")
	cfg, warns, err := ParseArgoConfig(&cm, &params)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TrackingMethod != TrackingAnnotationAndLabel || !cfg.ServerSideDiff || !cfg.IgnoreAggregatedRoles || cfg.IgnoreResourceStatusField != "crd" || cfg.Namespace != "argocd" {
		t.Errorf("config: %+v", cfg)
	}
	wantWarns := []Warning{{
		Source:  at(t, "argocd/argocd-cm.yaml:1"),
		Field:   "data[resource.customizations.ignoreDifferences.Service].managedFieldsManagers",
		Message: `Argo CD looks managed-fields overrides up by the exact key "<group>/<kind>" or "*/*", never "Service", so these managers are not applied; for a core kind write the key as resource.customizations.ignoreDifferences._Service`,
	}}
	if diff := cmp.Diff(wantWarns, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	src := "argocd/argocd-cm.yaml:1"
	want := []ignore.Rule{
		{Tool: ignore.ArgoCD, Source: src, Field: "data[resource.customizations.ignoreDifferences.all]",
			Target: ignore.Target{Group: "*", Kind: "*"}, ManagedFieldsManagers: []string{"kyverno"}},
		{Tool: ignore.ArgoCD, Source: src, Field: "data[resource.customizations.ignoreDifferences.Service]",
			Target: ignore.Target{Kind: "Service"}, JSONPointers: []string{"/spec/clusterIP"}},
		{Tool: ignore.ArgoCD, Source: src, Field: "data[resource.customizations][admissionregistration.k8s.io/MutatingWebhookConfiguration].ignoreDifferences",
			Target: ignore.Target{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, JSONPointers: []string{"/webhooks/0/clientConfig/caBundle"}},
		// The split key replaces the combined key's ignoreDifferences.
		{Tool: ignore.ArgoCD, Source: src, Field: "data[resource.customizations.ignoreDifferences.apps_Deployment]",
			Target:            ignore.Target{Group: "apps", Kind: "Deployment"},
			JQPathExpressions: []string{`.spec.template.spec.containers[] | select(.name == "istio-proxy")`}, ManagedFieldsManagers: []string{"kube-controller-manager"}},
		{Tool: ignore.ArgoCD, Source: src, Field: "data[resource.compareoptions].ignoreResourceStatusField",
			Target: ignore.Target{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, JSONPointers: []string{"/status"}, Implied: true},
	}
	if diff := cmp.Diff(want, cfg.Rules(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if _, err := ignore.Compile(cfg.Rules(), ignore.Options{}); err != nil {
		t.Errorf("rules do not compile: %v", err)
	}
}

func TestDefaultArgoConfig(t *testing.T) {
	cfg, warns, err := ParseArgoConfig(nil, nil)
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	if cfg.TrackingMethod != TrackingAnnotation || cfg.ServerSideDiff || cfg.InstanceLabelKey != "app.kubernetes.io/instance" {
		t.Errorf("defaults: %+v", cfg)
	}
	want := []ignore.Rule{{Tool: ignore.ArgoCD, Source: "Argo CD default", Field: "resource.compareoptions.ignoreResourceStatusField: all",
		Target: ignore.Target{Group: "*", Kind: "*"}, JSONPointers: []string{"/status"}, Implied: true}}
	if diff := cmp.Diff(want, cfg.Rules()); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

func TestArgoConfigStatusOptions(t *testing.T) {
	for _, tt := range []struct {
		value string
		rules int
	}{{"off", 0}, {"'false'", 0}, {"none", 0}, {"all", 1}, {"crd", 1}, {"sometimes", 1}} {
		doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n  resource.compareoptions: |\n    ignoreResourceStatusField: " + tt.value + "\n"
		cm := object(t, "cm.yaml:1", doc)
		cfg, _, err := ParseArgoConfig(&cm, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.value, err)
		}
		if got := len(cfg.Rules()); got != tt.rules {
			t.Errorf("ignoreResourceStatusField %s: %d rules, want %d", tt.value, got, tt.rules)
		}
	}
}

func TestParseArgoConfigErrors(t *testing.T) {
	tests := []struct {
		name, data string
		want       string
	}{
		{"ignoreDifferences YAML", "  resource.customizations.ignoreDifferences.apps_Deployment: |\n    jsonPointers: [/spec\n",
			"cm.yaml:4: data[resource.customizations.ignoreDifferences.apps_Deployment]: invalid ignoreDifferences YAML"},
		{"jq in argocd-cm", "  resource.customizations.ignoreDifferences.all: |\n    jqPathExpressions: ['.a[']\n",
			`cm.yaml:4: data[resource.customizations.ignoreDifferences.all]: jqPathExpressions[0] ".a["`},
		{"pointer in argocd-cm", "  resource.customizations.ignoreDifferences.all: |\n    jsonPointers: [status]\n",
			`cm.yaml:4: data[resource.customizations.ignoreDifferences.all]: jsonPointers[0]: JSON pointer "status" must start with "/"`},
		{"group kind key", "  resource.customizations.ignoreDifferences.a_b_c: |\n    jsonPointers: [/a]\n",
			"cm.yaml:4: data[resource.customizations.ignoreDifferences.a_b_c]: group kind should be"},
		{"customization type", "  resource.customizations.ignoreDiferences.apps_Deployment: |\n    jsonPointers: [/a]\n",
			`cm.yaml:4: data[resource.customizations.ignoreDiferences.apps_Deployment]: resource customization type "ignoreDiferences" not supported`},
		{"combined not a string", "  resource.customizations: |\n    apps/Deployment:\n      ignoreDifferences:\n        jsonPointers: [/a]\n",
			"cm.yaml:4: data[resource.customizations][apps/Deployment].ignoreDifferences: want a YAML string"},
		{"compare options", "  resource.compareoptions: 'ignoreAggregatedRoles: maybe'\n",
			"cm.yaml:4: data[resource.compareoptions]: invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := object(t, "cm.yaml:4", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n"+tt.data)
			_, _, err := ParseArgoConfig(&cm, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseArgoConfigWarnings(t *testing.T) {
	cm := object(t, "cm.yaml:1", `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
data:
  application.resourceTrackingMethod: labels
  resource.customizations.ignoreDifferences.apps_Deployment: |
    jsonPointer:
    - /spec/replicas
`)
	params := object(t, "params.yaml:1", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cmd-params-cm\ndata:\n  controller.diff.server.side: yes please\n")
	cfg, warns, err := ParseArgoConfig(&cm, &params)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TrackingMethod != TrackingAnnotation || cfg.ServerSideDiff {
		t.Errorf("config: %+v", cfg)
	}
	var msgs []string
	for _, w := range warns {
		msgs = append(msgs, w.String())
	}
	for _, want := range []string{
		`params.yaml:1: data[controller.diff.server.side]: "yes please" is not a boolean`,
		`cm.yaml:1: data[application.resourceTrackingMethod]: unknown tracking method "labels"`,
		`cm.yaml:1: data[resource.customizations.ignoreDifferences.apps_Deployment]: Argo CD ignores unknown fields here`,
	} {
		if !strings.Contains(strings.Join(msgs, "\n"), want) {
			t.Errorf("warnings %q lack %q", msgs, want)
		}
	}
}
