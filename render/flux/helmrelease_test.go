package flux

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReleaseName(t *testing.T) {
	tests := []struct {
		name, releaseName, targetNamespace string
		want                               string
	}{
		{"podinfo", "", "", "podinfo"},
		{"podinfo", "custom", "apps", "custom"},
		{"podinfo", "", "apps", "apps-podinfo"},
		// helm-controller's own examples (internal/release/name_test.go).
		{"release-name-with-very-long-name-which-is-longer-than-53-characters", "", "",
			"release-name-with-very-long-name-which-i-788ca0d0d7b0"},
		{"another-release-name-with-very-long-name-which-is-longer-than-53-characters", "", "",
			"another-release-name-with-very-long-name-7e72150d5a36"},
		{"x", "release-name-with-very-long-name-which-is-longer-than-53-characters", "ns",
			"release-name-with-very-long-name-which-i-788ca0d0d7b0"},
		// Exactly 53 characters stays as it is.
		{strings.Repeat("a", 48), "", "team", "team-" + strings.Repeat("a", 48)},
		{"", "", "", ""},
	}
	for _, tt := range tests {
		got := ReleaseName(tt.name, tt.releaseName, tt.targetNamespace)
		if got != tt.want {
			t.Errorf("ReleaseName(%q, %q, %q) = %q, want %q", tt.name, tt.releaseName, tt.targetNamespace, got, tt.want)
		}
		if len(got) > 53 {
			t.Errorf("%q is longer than 53", got)
		}
	}
}

func TestParseHelmRelease(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		want    func(hr *HelmRelease) *HelmRelease
		wantErr string
	}{
		{name: "chart template with defaults", spec: `
interval: 50m
chart:
  spec:
    chart: podinfo
    sourceRef: {kind: HelmRepository, name: podinfo}
values:
  replicas: 2
  big: 1000000`,
			want: func(hr *HelmRelease) *HelmRelease {
				hr.Chart = &ChartTemplate{Chart: "podinfo", Version: "*",
					SourceRef:     ObjectReference{Kind: "HelmRepository", Name: "podinfo", Namespace: "apps"},
					HelmChartName: "apps-web", HelmChartNamespace: "apps"}
				// Through JSON, as helm-controller reads them.
				hr.Values = map[string]any{"replicas": float64(2), "big": float64(1000000)}
				return hr
			}},
		{name: "chartRef, namespaces, policies, post-renderers", spec: `
chartRef: {kind: OCIRepository, name: podinfo}
releaseName: custom
targetNamespace: target
storageNamespace: storage
install: {crds: Skip}
upgrade: {crds: CreateReplace}
driftDetection:
  mode: warn
  ignore:
    - paths: [/spec/replicas]
      target: {kind: Deployment}
dependsOn: [{name: db}, {name: cache, namespace: infra}]
valuesFrom:
  - {kind: ConfigMap, name: base}
  - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token, optional: true}
postRenderers:
  - kustomize:
      images: [{name: nginx, newTag: "2"}]
      patches: [{patch: "- op: remove\n  path: /x", target: {kind: Service}}]
postRenderStrategy: nohooks
commonMetadata: {labels: {team: a}}`,
			want: func(hr *HelmRelease) *HelmRelease {
				hr.ReleaseName = "custom"
				hr.TargetNamespace, hr.ReleaseNamespace, hr.StorageNamespace = "target", "target", "storage"
				hr.ChartRef = &ObjectReference{Kind: "OCIRepository", Name: "podinfo", Namespace: "apps"}
				hr.InstallCRDs, hr.UpgradeCRDs = CRDsSkip, CRDsCreateReplace
				hr.DependsOn = []DependencyReference{{Name: "db", Namespace: "apps"}, {Name: "cache", Namespace: "infra"}}
				hr.ValuesFrom = []ValuesReference{{Kind: "ConfigMap", Name: "base", ValuesKey: "values.yaml"},
					{Kind: "Secret", Name: "creds", ValuesKey: "token", TargetPath: "auth.token", Optional: true}}
				hr.PostRenderers = []PostRenderer{{Kustomize: &KustomizePostRenderer{
					Images:  []Image{{Name: "nginx", NewTag: "2"}},
					Patches: []Patch{{Patch: "- op: remove\n  path: /x", Target: &Selector{Kind: "Service"}}}}}}
				hr.PostRenderStrategy = "nohooks"
				hr.CommonMetadata = &CommonMetadata{Labels: map[string]string{"team": "a"}}
				return hr
			}},
		{name: "neither chart nor chartRef", spec: "interval: 1m", wantErr: "either spec.chart or spec.chartRef"},
		{name: "both chart and chartRef", spec: `
chartRef: {kind: OCIRepository, name: x}
chart: {spec: {chart: x, sourceRef: {kind: HelmRepository, name: x}}}`, wantErr: "either spec.chart or spec.chartRef"},
		{name: "bad source kind", spec: "chart: {spec: {chart: x, sourceRef: {kind: OCIRepository, name: x}}}",
			wantErr: "sourceRef.kind"},
		{name: "bad chartRef kind", spec: "chartRef: {kind: GitRepository, name: x}", wantErr: "chartRef.kind"},
		{name: "bad CRD policy", spec: "chartRef: {kind: HelmChart, name: x}\ninstall: {crds: Always}",
			wantErr: "invalid CRD policy"},
		{name: "bad valuesFrom kind", spec: "chartRef: {kind: HelmChart, name: x}\nvaluesFrom: [{kind: Pod, name: x}]",
			wantErr: "valuesFrom[0].kind"},
		{name: "wrong type", spec: "chartRef: {kind: HelmChart, name: x}\nreleaseName: 5", wantErr: "spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := object(t, "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n"+
				"metadata: {name: web, namespace: apps}\nspec:\n  "+indent(tt.spec))
			hr, err := ParseHelmRelease(obj)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want(&HelmRelease{Name: "web", Namespace: "apps", ReleaseName: "web",
				ReleaseNamespace: "apps", StorageNamespace: "apps", InstallCRDs: CRDsCreate, UpgradeCRDs: CRDsCreate,
				PostRenderStrategy: "combined"})
			if diff := cmp.Diff(want, hr); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHelmReleaseExample(t *testing.T) {
	objs := objects(t, example+"/apps/base/podinfo/release.yaml")
	hr, err := ParseHelmRelease(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	if hr.ReleaseName != "podinfo" || hr.Chart == nil || hr.Chart.SourceRef.Namespace != "podinfo" ||
		hr.Chart.HelmChartName != "podinfo-podinfo" {
		t.Errorf("unexpected %+v (chart %+v)", hr, hr.Chart)
	}
}
