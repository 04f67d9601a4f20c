package simulate

import (
	"testing"
	"time"

	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
)

// The setups take their diff strategy and ignore rules from
// gitops.Settings.ComparisonFor, so Argo CD with its defaults (no
// Application in the repository) honours a resource's own
// ignore-differences annotation and argocd-cmd-params-cm's server-side
// diff, as Argo CD does for any Application.
func TestSetupsTakeTheComparison(t *testing.T) {
	objs := objects(t, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations: {argocd.argoproj.io/ignore-differences: /spec/replicas}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cmd-params-cm}
data: {controller.diff.server.side: "true"}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop, namespace: flux-system}
spec:
  ignore:
  - paths: [/spec/replicas]
`)
	at := func(file string) manifest.Source { return manifest.Source{File: file, Line: 1} }
	in := []gitops.Object{{Position: at("web.yaml"), Unstructured: objs[0]}, {Position: at("params.yaml"), Unstructured: objs[1]}, {Position: at("ks.yaml"), Unstructured: objs[2]}}
	tests := []struct {
		name  string
		objs  []gitops.Object
		check func(t *testing.T, tools map[string]Tool)
	}{
		{
			name: "Argo CD's defaults",
			objs: in[:2],
			check: func(t *testing.T, tools map[string]Tool) {
				a := tools["argocd"].(*ArgoCD)
				if !a.ServerSideDiff {
					t.Error("argocd-cmd-params-cm's server-side diff is not used")
				}
				if r := a.Rules.IgnoredBy(objs[0], "/spec/replicas"); r == nil || r.Source != "web.yaml:1" {
					t.Errorf("/spec/replicas ignored by %v, want the annotation of web.yaml:1", r)
				}
			},
		},
		{
			name: "a Kustomization",
			objs: in,
			check: func(t *testing.T, tools map[string]Tool) {
				f := tools["flux"].(*Flux)
				if len(f.Rules) != 1 || f.Rules[0].Name != "ks.yaml:1: spec.ignore[0]" || f.Rules[0].Paths[0] != "/spec/replicas" {
					t.Errorf("rules %+v", f.Rules)
				}
				if _, ok := tools["argocd"]; ok {
					t.Error("Argo CD simulated beside the repository's Kustomization")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rest, err := gitops.Discover(tt.objs)
			if err != nil {
				t.Fatal(err)
			}
			desired := []Desired{{Object: rest[0].Unstructured, Source: rest[0].Position}}
			setups, err := Setups(s, desired)
			if err != nil {
				t.Fatal(err)
			}
			tools := map[string]Tool{}
			for _, setup := range setups {
				tool, err := setup.Build(desired, nil)
				if err != nil {
					t.Fatal(err)
				}
				tools[setup.Tool] = tool
			}
			tt.check(t, tools)
		})
	}
}

// A HelmRelease is simulated as helm-controller with its drift detection
// mode, ignore rules and release name.
func TestSetupsHelmRelease(t *testing.T) {
	objs := objects(t, `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: flux-system}
spec:
  interval: 5m
  targetNamespace: shop
  driftDetection:
    mode: warn
    ignore:
    - paths: [/spec/replicas]
`)
	s, _, err := gitops.Discover([]gitops.Object{{Position: manifest.Source{File: "hr.yaml", Line: 1}, Unstructured: objs[0]}})
	if err != nil {
		t.Fatal(err)
	}
	setups, err := Setups(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(setups) != 1 || setups[0].Tool != "flux" || setups[0].Unit != "HelmRelease web" {
		t.Fatalf("setups %+v", setups)
	}
	tool, err := setups[0].Build(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := tool.(*HelmRelease)
	if !ok {
		t.Fatalf("tool %T, want *HelmRelease", tool)
	}
	if h.Mode != gitops.HelmDriftWarn || h.ReleaseName != "shop-web" || h.ReleaseNamespace != "shop" || len(h.Rules) != 1 || h.Interval != 5*time.Minute {
		t.Errorf("%+v", h)
	}
	if got, want := h.Settings(), "helm-controller, drift detection warn, every 5m0s, 1 ignore rule(s)"; got != want {
		t.Errorf("settings %q, want %q", got, want)
	}
}
