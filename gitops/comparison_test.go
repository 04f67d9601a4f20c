package gitops

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/drift/ignore"
)

func TestComparisonFor(t *testing.T) {
	app := func(name, compare string, pointers ...string) string {
		doc := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: " + name + "\n"
		if compare != "" {
			doc += "  annotations:\n    argocd.argoproj.io/compare-options: " + compare + "\n"
		}
		if len(pointers) > 0 {
			doc += "spec:\n  ignoreDifferences:\n  - group: apps\n    kind: Deployment\n    jsonPointers: [" + strings.Join(pointers, ", ") + "]\n"
		}
		return doc
	}
	kustomization := func(name string, paths ...string) string {
		doc := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name + "\n  namespace: flux-system\n"
		if len(paths) > 0 {
			doc += "spec:\n  ignore:\n  - paths: [" + strings.Join(paths, ", ") + "]\n"
		}
		return doc
	}
	const (
		cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n" +
			"  resource.customizations.ignoreDifferences.apps_Deployment: |\n    jsonPointers: [/spec/paused]\n"
		params = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cmd-params-cm\ndata:\n  controller.diff.server.side: \"true\"\n"
		// The resource-level rule: Argo CD honours it for every
		// Application that manages the resource.
		annotated = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n" +
			"    argocd.argoproj.io/ignore-differences: /spec/replicas\n"
		// statusAll is the rule Argo CD applies by itself.
		statusAll = "Argo CD default: resource.compareoptions.ignoreResourceStatusField: all (implied)"
	)
	type fixture struct{ source, doc string }
	tests := []struct {
		name    string
		objs    []fixture
		unit    func(*Settings) Unit
		want    Comparison
		wantIDs []string
	}{
		{
			name: "no settings, no tool asked: none",
			unit: func(*Settings) Unit { return Unit{} },
		},
		{
			name:    "no settings, Argo CD: its defaults, status ignored",
			unit:    func(*Settings) Unit { return Unit{Tool: ignore.ArgoCD} },
			want:    Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoLegacy},
			wantIDs: []string{statusAll},
		},
		{
			name: "no settings, Flux: no rules",
			unit: func(*Settings) Unit { return Unit{Tool: ignore.Flux} },
			want: Comparison{Tool: ignore.Flux, Strategy: StrategyFlux},
		},
		{
			name: "an Application: its rules, the resource's, argocd-cm's, in Argo CD's order",
			objs: []fixture{{"cm.yaml:1", cm}, {"web.yaml:3", annotated}, {"shop.yaml:1", app("shop", "", "/spec/template")}},
			unit: func(s *Settings) Unit { return Unit{Tool: ignore.ArgoCD, App: s.Applications[0]} },
			want: Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoLegacy},
			wantIDs: []string{
				"shop.yaml:1: spec.ignoreDifferences[0]",
				"web.yaml:3: metadata.annotations[argocd.argoproj.io/ignore-differences]",
				"cm.yaml:1: data[resource.customizations.ignoreDifferences.apps_Deployment]",
				"cm.yaml:1: data[resource.compareoptions].ignoreResourceStatusField (implied)",
			},
		},
		{
			name: "every Application: each one's rules, the shared ones once",
			objs: []fixture{{"web.yaml:3", annotated}, {"a.yaml:1", app("a", "", "/spec/a")}, {"b.yaml:1", app("b", "", "/spec/b")}},
			unit: func(*Settings) Unit { return Unit{Tool: ignore.ArgoCD} },
			want: Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoLegacy},
			wantIDs: []string{
				"a.yaml:1: spec.ignoreDifferences[0]",
				"b.yaml:1: spec.ignoreDifferences[0]",
				"web.yaml:3: metadata.annotations[argocd.argoproj.io/ignore-differences]",
				statusAll,
			},
		},
		{
			// What truce sync reads from an --ignore file that holds no
			// Application: the resource-level rule is kept.
			name:    "Argo CD without an Application: the resource-level rules still apply",
			objs:    []fixture{{"web.yaml:3", annotated}},
			unit:    func(*Settings) Unit { return Unit{Tool: ignore.ArgoCD} },
			want:    Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoLegacy},
			wantIDs: []string{"web.yaml:3: metadata.annotations[argocd.argoproj.io/ignore-differences]", statusAll},
		},
		{
			name:    "the Application turns on server-side diff with the mutation webhook",
			objs:    []fixture{{"shop.yaml:1", app("shop", "ServerSideDiff=true,IncludeMutationWebhook=true")}},
			unit:    func(s *Settings) Unit { return Unit{Tool: ignore.ArgoCD, App: s.Applications[0]} },
			want:    Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoServerSide, IncludeMutationWebhook: true},
			wantIDs: []string{statusAll},
		},
		{
			name:    "argocd-cmd-params-cm turns on server-side diff for every Application",
			objs:    []fixture{{"params.yaml:1", params}, {"shop.yaml:1", app("shop", "")}},
			unit:    func(*Settings) Unit { return Unit{Tool: ignore.ArgoCD} },
			want:    Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoServerSide},
			wantIDs: []string{statusAll},
		},
		{
			name:    "the Application's ServerSideDiff=false wins over argocd-cmd-params-cm",
			objs:    []fixture{{"params.yaml:1", params}, {"shop.yaml:1", app("shop", "ServerSideDiff=false")}},
			unit:    func(s *Settings) Unit { return Unit{Tool: ignore.ArgoCD, App: s.Applications[0]} },
			want:    Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoLegacy},
			wantIDs: []string{statusAll},
		},
		{
			name:    "one Kustomization: its spec.ignore only",
			objs:    []fixture{{"a.yaml:1", kustomization("a", "/spec/a")}, {"b.yaml:1", kustomization("b", "/spec/b")}},
			unit:    func(s *Settings) Unit { return Unit{Tool: ignore.Flux, Kustomization: s.Kustomizations[1]} },
			want:    Comparison{Tool: ignore.Flux, Strategy: StrategyFlux},
			wantIDs: []string{"b.yaml:1: spec.ignore[0]"},
		},
		{
			name:    "every Kustomization, and no Argo CD rule for Flux",
			objs:    []fixture{{"web.yaml:3", annotated}, {"cm.yaml:1", cm}, {"a.yaml:1", kustomization("a", "/spec/a")}, {"b.yaml:1", kustomization("b", "/spec/b")}},
			unit:    func(*Settings) Unit { return Unit{Tool: ignore.Flux} },
			want:    Comparison{Tool: ignore.Flux, Strategy: StrategyFlux},
			wantIDs: []string{"a.yaml:1: spec.ignore[0]", "b.yaml:1: spec.ignore[0]"},
		},
		{
			name:    "auto: Flux when there is a Kustomization",
			objs:    []fixture{{"shop.yaml:1", app("shop", "", "/spec/a")}, {"a.yaml:1", kustomization("a", "/spec/a")}},
			unit:    func(s *Settings) Unit { return Unit{App: s.Applications[0]} },
			want:    Comparison{Tool: ignore.Flux, Strategy: StrategyFlux},
			wantIDs: []string{"a.yaml:1: spec.ignore[0]"},
		},
		{
			name:    "auto: Argo CD when there is only an Application",
			objs:    []fixture{{"shop.yaml:1", app("shop", "ServerSideDiff=true", "/spec/a")}},
			unit:    func(*Settings) Unit { return Unit{} },
			want:    Comparison{Tool: ignore.ArgoCD, Strategy: StrategyArgoServerSide},
			wantIDs: []string{"shop.yaml:1: spec.ignoreDifferences[0]", statusAll},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []Object
			for _, f := range tt.objs {
				objs = append(objs, object(t, f.source, f.doc))
			}
			s, _, err := Discover(objs)
			if err != nil {
				t.Fatal(err)
			}
			got := s.ComparisonFor(tt.unit(s))
			var ids []string
			for _, r := range got.Rules {
				id := r.String()
				if r.Implied {
					id += " (implied)"
				}
				ids = append(ids, id)
			}
			got.Rules = nil
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("comparison (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantIDs, ids); d != "" {
				t.Errorf("rules (-want +got):\n%s", d)
			}
		})
	}
}
