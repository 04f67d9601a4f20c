package gitops

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/drift/ignore"
)

const podinfoKustomization = `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: app
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps/podinfo
  prune: true
  force: false
  targetNamespace: podinfo
  sourceRef:
    kind: GitRepository
    name: app
  ignore:
  - paths:
    - /spec/replicas
    target:
      kind: Deployment
      name: podinfo
  - paths:
    - /metadata/annotations/example.com~1config-hash
`

func TestParseFluxKustomization(t *testing.T) {
	k, _, err := ParseFluxKustomization(object(t, "clusters/prod/app.yaml:1", podinfoKustomization))
	if err != nil {
		t.Fatal(err)
	}
	want := &FluxKustomization{
		Source: at(t, "clusters/prod/app.yaml:1"), APIVersion: "kustomize.toolkit.fluxcd.io/v1", Name: "app", Namespace: "flux-system",
		Path: "./apps/podinfo", Prune: true, TargetNamespace: "podinfo", Interval: 10 * time.Minute,
		Ignore: []FluxIgnore{
			{Paths: []string{"/spec/replicas"}, Target: &ignore.Target{Kind: "Deployment", Name: "podinfo"}},
			{Paths: []string{"/metadata/annotations/example.com~1config-hash"}},
		},
	}
	if diff := cmp.Diff(want, k); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	wantRules := []ignore.Rule{
		{Tool: ignore.Flux, Source: "clusters/prod/app.yaml:1", Field: "spec.ignore[0]", Target: ignore.Target{Kind: "Deployment", Name: "podinfo"}, JSONPointers: []string{"/spec/replicas"}},
		{Tool: ignore.Flux, Source: "clusters/prod/app.yaml:1", Field: "spec.ignore[1]", JSONPointers: []string{"/metadata/annotations/example.com~1config-hash"}},
	}
	if diff := cmp.Diff(wantRules, k.Rules()); diff != "" {
		t.Fatalf("rules (-want +got):\n%s", diff)
	}
}

func TestParseFluxKustomizationV1beta2(t *testing.T) {
	doc := strings.Replace(podinfoKustomization, "kustomize.toolkit.fluxcd.io/v1", "kustomize.toolkit.fluxcd.io/v1beta2", 1)
	k, _, err := ParseFluxKustomization(object(t, "app.yaml:1", doc))
	if err != nil {
		t.Fatal(err)
	}
	if k.APIVersion != "kustomize.toolkit.fluxcd.io/v1beta2" || len(k.Ignore) != 2 {
		t.Fatalf("%+v", k)
	}
}

func TestParseFluxKustomizationErrors(t *testing.T) {
	tests := []struct {
		name, ignore, want string
	}{
		{"kind regex", "  - paths: [/spec/replicas]\n    target:\n      kind: 'Deploy('\n",
			"ks.yaml:9: spec.ignore[0]: target: invalid kind regex"},
		{"name regex", "  - paths: [/spec/replicas]\n  - paths: [/spec]\n    target:\n      name: '*'\n",
			"ks.yaml:9: spec.ignore[1]: target: invalid name regex"},
		{"label selector", "  - paths: [/spec/replicas]\n    target:\n      labelSelector: 'app in ('\n",
			"ks.yaml:9: spec.ignore[0]: target: invalid label selector"},
		{"pointer", "  - paths: [spec/replicas]\n",
			`ks.yaml:9: spec.ignore[0]: paths[0]: JSON pointer "spec/replicas" must start with "/"`},
		{"no paths", "  - target:\n      kind: Deployment\n",
			"ks.yaml:9: spec.ignore[0].paths: at least one JSON pointer is required"},
		{"target not a map", "  - paths: [/a]\n    target: Deployment\n",
			"ks.yaml:9: spec.ignore[0].target: want a map, got a string"},
		{"interval", "  - paths: [/a]\n  interval: often\n",
			`ks.yaml:9: spec.interval: "often" is not a duration`},
		{"negative interval", "  - paths: [/a]\n  interval: -1m\n",
			"ks.yaml:9: spec.interval: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\nspec:\n  ignore:\n" + tt.ignore
			_, _, err := ParseFluxKustomization(object(t, "ks.yaml:9", doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

const podinfoHelmRelease = `
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
  namespace: flux-system
spec:
  interval: 5m
  releaseName: web
  targetNamespace: shop
  chart:
    spec:
      chart: podinfo
      sourceRef: {kind: HelmRepository, name: podinfo}
`

func TestParseFluxHelmRelease(t *testing.T) {
	no := false
	tests := []struct {
		name, spec string
		want       func(h *FluxHelmRelease)
	}{
		{name: "drift detection is disabled by default", want: func(h *FluxHelmRelease) {}},
		{name: "warn", spec: "  driftDetection: {mode: warn}\n", want: func(h *FluxHelmRelease) { h.DriftDetection = HelmDriftWarn }},
		{name: "disabled", spec: "  driftDetection: {mode: disabled}\n", want: func(h *FluxHelmRelease) {}},
		{
			name: "enabled with ignore rules",
			spec: "  driftDetection:\n    mode: enabled\n    ignore:\n    - paths: [/spec/replicas]\n      target: {kind: Deployment}\n",
			want: func(h *FluxHelmRelease) {
				h.DriftDetection = HelmDriftEnabled
				h.Ignore = []FluxIgnore{{Paths: []string{"/spec/replicas"}, Target: &ignore.Target{Kind: "Deployment"}}}
			},
		},
		{name: "client-side install", spec: "  install: {serverSideApply: false}\n", want: func(h *FluxHelmRelease) { h.InstallServerSideApply = &no }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseFluxHelmRelease(object(t, "apps/hr.yaml:4", podinfoHelmRelease+tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			want := &FluxHelmRelease{Source: at(t, "apps/hr.yaml:4"), Name: "podinfo", Namespace: "flux-system",
				ReleaseName: "web", TargetNamespace: "shop", Interval: 5 * time.Minute, DriftDetection: HelmDriftDisabled}
			tt.want(want)
			if diff := cmp.Diff(want, h); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFluxHelmReleaseErrors(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"unknown mode", "  driftDetection: {mode: correct}\n", `apps/hr.yaml:4: spec.driftDetection.mode: "correct" is not one of enabled, warn or disabled`},
		{"mode in capitals", "  driftDetection: {mode: Enabled}\n", `apps/hr.yaml:4: spec.driftDetection.mode: "Enabled" is not one of`},
		{"mode not a string", "  driftDetection: {mode: true}\n", "apps/hr.yaml:4: spec.driftDetection.mode: want a string, got a boolean"},
		{"ignore without paths", "  driftDetection:\n    ignore: [{target: {kind: Deployment}}]\n", "apps/hr.yaml:4: spec.driftDetection.ignore[0].paths: at least one JSON pointer is required"},
		{"serverSideApply not a boolean", "  install: {serverSideApply: enabled}\n", "apps/hr.yaml:4: spec.install.serverSideApply: want true or false, got a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFluxHelmRelease(object(t, "apps/hr.yaml:4", podinfoHelmRelease+tt.spec))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
