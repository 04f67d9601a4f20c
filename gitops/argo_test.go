package gitops

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/drift/ignore"
)

const shopApp = `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop
  namespace: argocd
  annotations:
    argocd.argoproj.io/compare-options: ServerSideDiff=true, IncludeMutationWebhook=true
spec:
  project: default
  destination:
    namespace: shop
  source:
    path: apps/shop
  sources:
  - path: apps/shared
  - chart: redis
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
    syncOptions:
    - ServerSideApply=true
    - RespectIgnoreDifferences=true
    - CreateNamespace=true
  ignoreDifferences:
  - group: apps
    kind: Deployment
    jqPathExpressions:
    - .spec.template.spec.containers[].image
  - kind: Service
    name: web
    namespace: shop
    jsonPointers:
    - /spec/clusterIP
    managedFieldsManagers:
    - kube-controller-manager
`

func TestParseArgoApplication(t *testing.T) {
	app, warns, err := ParseArgoApplication(object(t, "apps/shop.yaml:1", shopApp))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	on := true
	want := &ArgoApplication{
		Source: at(t, "apps/shop.yaml:1"), Name: "shop", Namespace: "argocd", Project: "default",
		DestinationNamespace: "shop",
		Paths:                []string{"apps/shop", "apps/shared"},
		Sources:              []ArgoSource{{Path: "apps/shop"}, {Path: "apps/shared"}, {Chart: "redis"}},
		IgnoreDifferences: []ArgoIgnoreDifference{
			{Group: "apps", Kind: "Deployment", JQPathExpressions: []string{".spec.template.spec.containers[].image"}},
			{Kind: "Service", Name: "web", Namespace: "shop", JSONPointers: []string{"/spec/clusterIP"}, ManagedFieldsManagers: []string{"kube-controller-manager"}},
		},
		Automated:      &ArgoAutomated{Enabled: true, Prune: true, SelfHeal: true},
		SyncOptions:    ArgoSyncOptions{ServerSideApply: true, RespectIgnoreDifferences: true, Other: []string{"CreateNamespace=true"}},
		CompareOptions: ArgoCompareOptions{ServerSideDiff: &on, IncludeMutationWebhook: true},
	}
	if diff := cmp.Diff(want, app); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	wantRules := []ignore.Rule{
		{Tool: ignore.ArgoCD, Source: "apps/shop.yaml:1", Field: "spec.ignoreDifferences[0]", Target: ignore.Target{Group: "apps", Kind: "Deployment"},
			JQPathExpressions: []string{".spec.template.spec.containers[].image"}},
		{Tool: ignore.ArgoCD, Source: "apps/shop.yaml:1", Field: "spec.ignoreDifferences[1]", Target: ignore.Target{Kind: "Service", Name: "web", Namespace: "shop"},
			JSONPointers: []string{"/spec/clusterIP"}, ManagedFieldsManagers: []string{"kube-controller-manager"}},
	}
	if diff := cmp.Diff(wantRules, app.Rules()); diff != "" {
		t.Fatalf("rules (-want +got):\n%s", diff)
	}
}

func TestServerSideDiff(t *testing.T) {
	tests := []struct {
		name       string
		annotation string // "" for none
		controller bool
		want       bool
	}{
		{"default off", "", false, false},
		{"controller on", "", true, true},
		{"app on", "ServerSideDiff=true", false, true},
		{"app off overrides controller", "ServerSideDiff=false", true, false},
		{"false wins over true", "ServerSideDiff=true,ServerSideDiff=false", false, false},
		{"wrong case is ignored", "ServerSideDiff=True", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: a\n"
			if tt.annotation != "" {
				doc += "  annotations:\n    argocd.argoproj.io/compare-options: " + tt.annotation + "\n"
			}
			app, _, err := ParseArgoApplication(object(t, "a.yaml:1", doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := app.ServerSideDiff(&ArgoConfig{ServerSideDiff: tt.controller}); got != tt.want {
				t.Fatalf("ServerSideDiff = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseArgoApplicationAutomated(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *ArgoAutomated
	}{
		{"manual", "  syncPolicy: {}\n", nil},
		{"null", "  syncPolicy:\n    automated: null\n", nil},
		{"empty means enabled", "  syncPolicy:\n    automated: {}\n", &ArgoAutomated{Enabled: true}},
		{"explicitly disabled", "  syncPolicy:\n    automated:\n      enabled: false\n      selfHeal: true\n", &ArgoAutomated{SelfHeal: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: a\nspec:\n" + tt.yaml
			app, _, err := ParseArgoApplication(object(t, "a.yaml:1", doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, app.Automated); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseArgoApplicationErrors(t *testing.T) {
	tests := []struct {
		name, spec string
		want       []string
	}{
		{
			name: "jq does not parse",
			spec: "  ignoreDifferences:\n  - kind: Deployment\n    group: apps\n    jqPathExpressions: ['.spec.template.spec.containers[']\n",
			want: []string{`apps/shop.yaml:7: spec.ignoreDifferences[0]: jqPathExpressions[0] ".spec.template.spec.containers[": `},
		},
		{
			name: "pointer without leading slash",
			spec: "  ignoreDifferences:\n  - kind: Deployment\n    group: apps\n    jsonPointers: [spec/replicas]\n",
			want: []string{`apps/shop.yaml:7: spec.ignoreDifferences[0]: jsonPointers[0]: JSON pointer "spec/replicas" must start with "/"`},
		},
		{
			name: "pointers as a string",
			spec: "  ignoreDifferences:\n  - kind: Deployment\n    jsonPointers: /spec/replicas\n",
			want: []string{`apps/shop.yaml:7: spec.ignoreDifferences[0].jsonPointers: want a list of strings, got a string`},
		},
		{
			name: "kind missing and bad glob, both reported",
			spec: "  ignoreDifferences:\n  - group: apps\n    jsonPointers: [/spec/replicas]\n  - kind: Deployment\n    group: '[apps'\n    jsonPointers: [/spec/replicas]\n",
			want: []string{
				`apps/shop.yaml:7: spec.ignoreDifferences[0].kind: kind is required`,
				`apps/shop.yaml:7: spec.ignoreDifferences[1]: group: glob "[apps" has an unterminated "["`,
			},
		},
		{
			name: "glob",
			spec: "  ignoreDifferences:\n  - kind: Deployment\n    group: '[apps'\n    jsonPointers: [/spec/replicas]\n",
			want: []string{`apps/shop.yaml:7: spec.ignoreDifferences[0]: group: glob "[apps" has an unterminated "["`},
		},
		{
			name: "sync options not a list",
			spec: "  syncPolicy:\n    syncOptions: ServerSideApply=true\n",
			want: []string{`apps/shop.yaml:7: spec.syncPolicy.syncOptions: want a list of strings, got a string`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: shop\nspec:\n" + tt.spec
			_, _, err := ParseArgoApplication(object(t, "apps/shop.yaml:7", doc))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseArgoApplicationWarnings(t *testing.T) {
	doc := `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop
  annotations:
    argocd.argoproj.io/compare-options: serverSideDiff=true,IgnoreExtraneous
spec:
  syncPolicy:
    syncOptions:
    - ServerSideApply=True
    - Validate=false
`
	app, warns, err := ParseArgoApplication(object(t, "shop.yaml:2", doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Warning{
		{Source: at(t, "shop.yaml:2"), Field: "spec.syncPolicy.syncOptions[0]",
			Message: `"ServerSideApply=True" is not "ServerSideApply=true": Argo CD compares sync options as exact strings and ignores this one`},
		{Source: at(t, "shop.yaml:2"), Field: "metadata.annotations[argocd.argoproj.io/compare-options]",
			Message: `"serverSideDiff=true" is not "ServerSideDiff=true": Argo CD compares options as exact strings and ignores this one`},
	}
	if diff := cmp.Diff(want, warns); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
	if app.SyncOptions.ServerSideApply || app.CompareOptions.ServerSideDiff != nil || !app.CompareOptions.IgnoreExtraneous {
		t.Fatalf("options: %+v %+v", app.SyncOptions, app.CompareOptions)
	}
}
