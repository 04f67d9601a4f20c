package world

import (
	"encoding/base64"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/truce-dev/truce/internal/s3test"
	"github.com/truce-dev/truce/render"
)

// Kustomizations of Buckets build the fetched objects; HelmCharts of
// Buckets load the chart from them. Credentials come from the Secret of
// spec.secretRef when the repository holds it, else --bucket-secret.
func TestBucketSources(t *testing.T) {
	const secret = "bucket-s3cr3t"
	s3 := s3test.NewServer(t)
	s3.AddKey("truce", secret)
	s3.Put("fleet", map[string]string{
		"prod/app/cm.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-bucket, namespace: default}\n",
		"prod/app/ignored.yaml":        "not: yaml: at: all",
		"charts/web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"charts/web/values.yaml":       "name: from-bucket-chart\n",
		"charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Values.name }}'}\n",
	})
	bucketObj := func(extra string) string {
		return `apiVersion: source.toolkit.fluxcd.io/v1
kind: Bucket
metadata: {name: fleet, namespace: flux-system}
spec:
  bucketName: fleet
  endpoint: ` + s3.Endpoint() + `
  insecure: true
  interval: 1m
  ignore: ignored.yaml
` + extra + `---
`
	}
	secretObj := func(key string) string {
		return `apiVersion: v1
kind: Secret
metadata: {name: s3, namespace: flux-system}
data: {accesskey: ` + base64.StdEncoding.EncodeToString([]byte("truce")) + `, secretkey: ` + base64.StdEncoding.EncodeToString([]byte(key)) + `}
---
`
	}
	kustomization := `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: app, namespace: flux-system}
spec: {interval: 10m, path: ./prod/app, prune: true, sourceRef: {kind: Bucket, name: fleet}}
`
	chart := `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata: {name: web, namespace: flux-system}
spec: {chart: ./charts/web, sourceRef: {kind: Bucket, name: fleet}, interval: 1m}
---
` + helmChartRelease
	secretDir := func(t *testing.T, key string) string {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "accesskey"), "truce\n")
		writeFile(t, filepath.Join(dir, "secretkey"), key+"\n")
		return dir
	}
	tests := []struct {
		name, more, unit string
		// secretDir is --bucket-secret's secret key, "" for none.
		secretDir string
		// prefetch loads once online before the offline load.
		offline, prefetch bool
		want, problem     string
		unpredictable     bool
	}{
		{name: "Kustomization with the repository's Secret", more: bucketObj("  secretRef: {name: s3}\n") + secretObj(secret) + kustomization,
			unit: "Kustomization flux-system/app", want: "from-bucket"},
		{name: "HelmChart with --bucket-secret", more: bucketObj("  secretRef: {name: s3}\n") + chart, secretDir: secret,
			unit: "HelmRelease apps/web", want: "from-bucket-chart"},
		{name: "refused credentials", more: bucketObj("  secretRef: {name: s3}\n") + kustomization, secretDir: "wrong",
			unit: "Kustomization flux-system/app", problem: "refused access with the credentials of --bucket-secret", unpredictable: true},
		{name: "a secretRef truce cannot read", more: bucketObj("  secretRef: {name: s3}\n") + kustomization,
			unit: "Kustomization flux-system/app", problem: "spec.secretRef s3 is not in the repository as plain data", unpredictable: true},
		{name: "offline after a fetch", more: bucketObj("  secretRef: {name: s3}\n") + secretObj(secret) + kustomization, offline: true, prefetch: true,
			unit: "Kustomization flux-system/app", want: "from-bucket"},
		{name: "offline", more: bucketObj("") + kustomization, offline: true,
			unit: "Kustomization flux-system/app", problem: "Bucket flux-system/fleet (endpoint " + s3.Endpoint() + ", bucket fleet): not in the cache", unpredictable: true},
		{name: "gcp", more: bucketObj("  provider: gcp\n") + kustomization,
			unit: "Kustomization flux-system/app", problem: "not gcp", unpredictable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fluxCluster(t, tc.more)
			opts := offline(t, root)
			opts.Render.Offline = false
			if tc.secretDir != "" {
				opts.BucketSecret = secretDir(t, tc.secretDir)
			}
			if tc.prefetch {
				if _, err := Load(t.Context(), []string{filepath.Join(root, "clusters", "prod")}, opts); err != nil {
					t.Fatal(err)
				}
			}
			opts.Render.Offline = tc.offline
			worlds, err := Load(t.Context(), []string{filepath.Join(root, "clusters", "prod")}, opts)
			if err != nil {
				t.Fatal(err)
			}
			u := units(worlds[0])[tc.unit]
			if u == nil {
				t.Fatalf("no %s among %v", tc.unit, keys(units(worlds[0])))
			}
			if tc.want == "" {
				if u.Problem == nil || !strings.Contains(u.Problem.Error(), tc.problem) {
					t.Fatalf("problem %v, want one with %q", u.Problem, tc.problem)
				}
				if _, ok := render.AsUnpredictable(u.Problem); ok != tc.unpredictable {
					t.Errorf("problem %v: Unpredictable %v, want %v", u.Problem, ok, tc.unpredictable)
				}
				if strings.Contains(u.Problem.Error(), secret) || strings.Contains(u.Problem.Error(), "wrong") {
					t.Errorf("problem %v shows the secret key", u.Problem)
				}
				return
			}
			if u.Problem != nil || !applies(worlds[0], u.Unit, "ConfigMap/"+tc.want) {
				t.Fatalf("ConfigMap/%s not applied; problem %v", tc.want, u.Problem)
			}
			for _, o := range worlds[0].Objects {
				if o.Source.Unit == u.Unit && !regexp.MustCompile(`^http://[^@]+/fleet@sha256:[0-9a-f]{12}//`).MatchString(o.Source.File) {
					t.Errorf("position %s does not name the bucket", o.Source)
				}
			}
		})
	}
}
