package world

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/render"
)

// writeChart writes a chart named name whose one template is a ConfigMap
// named by .Values.name.
func writeChart(t *testing.T, dir, name string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "Chart.yaml"), "apiVersion: v2\nname: "+name+"\nversion: 1.0.0\n")
	writeFile(t, filepath.Join(dir, "values.yaml"), "name: from-chart\n")
	writeFile(t, filepath.Join(dir, "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Values.name }}'}\n")
}

const helmChartRelease = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec:
  interval: 10m
  chartRef: {kind: HelmChart, name: web, namespace: flux-system}
`

// HelmRelease chartRefs to HelmCharts read the chart as
// spec.chart.spec would; offline, Buckets not in the cache are
// Unpredictable.
func TestHelmChartAndBucketSources(t *testing.T) {
	tests := []struct {
		name string
		more string
		// unit is the unit looked at; want the ConfigMap it applies, or
		// problem in its Problem (Unpredictable when unpredictable).
		unit, want, problem string
		unpredictable       bool
	}{
		{
			name: "HelmChart of this repository",
			more: `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata: {name: web, namespace: flux-system}
spec: {chart: ./charts/web, sourceRef: {kind: GitRepository, name: flux-system}, interval: 1m}
---
` + helmChartRelease + `  values: {name: from-release}
`,
			unit: "HelmRelease apps/web", want: "from-release",
		},
		{
			name: "HelmChart valuesFiles",
			more: `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata: {name: web, namespace: flux-system}
spec:
  chart: ./charts/web
  sourceRef: {kind: GitRepository, name: flux-system}
  valuesFiles: [./charts/web/values.yaml, charts/web/values-prod.yaml, charts/web/values-missing.yaml]
  ignoreMissingValuesFiles: true
  interval: 1m
---
` + helmChartRelease,
			unit: "HelmRelease apps/web", want: "from-prod",
		},
		{
			name: "spec.chart.spec valuesFiles with one missing",
			more: `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/web
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
      valuesFiles: [charts/web/values-prod.yaml, charts/web/values-missing.yaml]
`,
			unit: "HelmRelease apps/web", problem: "no values file found at path '/charts/web/values-missing.yaml' (reference 'charts/web/values-missing.yaml')",
		},
		{
			name: "HelmChart of a HelmRepository offline",
			more: `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: charts, namespace: flux-system}
spec: {url: https://charts.example.com, interval: 1m}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata: {name: web, namespace: flux-system}
spec: {chart: web, version: 1.x, sourceRef: {kind: HelmRepository, name: charts}, interval: 1m}
---
` + helmChartRelease,
			unit: "HelmRelease apps/web", problem: "https://charts.example.com", unpredictable: true,
		},
		{
			name: "a HelmChart that is not there",
			more: helmChartRelease,
			unit: "HelmRelease apps/web", problem: "chartRef HelmChart flux-system/web is not in the repository",
		},
		{
			name: "a HelmChart of a Bucket",
			more: `apiVersion: source.toolkit.fluxcd.io/v1
kind: Bucket
metadata: {name: charts, namespace: flux-system}
spec: {bucketName: charts, endpoint: minio.example.com, interval: 1m}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata: {name: web, namespace: flux-system}
spec: {chart: ./web, sourceRef: {kind: Bucket, name: charts}, interval: 1m}
---
` + helmChartRelease,
			unit: "HelmRelease apps/web", problem: "Bucket flux-system/charts (endpoint minio.example.com, bucket charts): not in the cache", unpredictable: true,
		},
		{
			name: "a Kustomization of a Bucket",
			more: `apiVersion: source.toolkit.fluxcd.io/v1
kind: Bucket
metadata: {name: other, namespace: flux-system}
spec: {bucketName: manifests, endpoint: s3.amazonaws.com, provider: aws, interval: 1m}
---
` + appKustomization("Bucket", "other"),
			unit: "Kustomization flux-system/app", problem: "Bucket flux-system/other (endpoint s3.amazonaws.com, bucket manifests): not in the cache", unpredictable: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fluxCluster(t, tc.more)
			writeChart(t, filepath.Join(root, "charts", "web"), "web")
			writeFile(t, filepath.Join(root, "charts", "web", "values-prod.yaml"), "name: from-prod\n")
			opts := offline(t, root)
			worlds, err := Load(t.Context(), []string{filepath.Join(root, "clusters", "prod")}, opts)
			if err != nil {
				t.Fatal(err)
			}
			u := units(worlds[0])[tc.unit]
			if u == nil {
				t.Fatalf("no %s among %v (%v)", tc.unit, keys(units(worlds[0])), worlds[0].Units[0].Problem)
			}
			if tc.want != "" {
				if !applies(worlds[0], u.Unit, "ConfigMap/"+tc.want) {
					t.Fatalf("ConfigMap/%s not applied; problem %v", tc.want, u.Problem)
				}
				return
			}
			if u.Problem == nil || !strings.Contains(u.Problem.Error(), tc.problem) {
				t.Fatalf("problem %v, want one with %q", u.Problem, tc.problem)
			}
			if _, ok := render.AsUnpredictable(u.Problem); ok != tc.unpredictable {
				t.Errorf("problem %v: Unpredictable %v, want %v", u.Problem, ok, tc.unpredictable)
			}
		})
	}
}
