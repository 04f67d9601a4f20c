package world

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/truce-dev/truce/internal/ocitest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/flux"
)

// Kustomizations of OCIRepositories build the artifact's layer; HelmRelease
// chartRefs to them install the chart helm push put there. Positions name
// the artifact by URL and revision.
func TestOCIRepositorySources(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	reg.Push(t, "manifests/app", "v1.0.0", ocitest.Layer{MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip",
		Data: ocitest.TarGz(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-oci, namespace: default}\n"})})
	reg.Push(t, "charts/web", "1.0.0", ocitest.Layer{MediaType: flux.HelmChartLayerMediaType, Data: ocitest.TarGz(t, map[string]string{
		"web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"web/values.yaml":       "name: from-chart\n",
		"web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Values.name }}'}\n",
	})})
	host := reg.Host()
	ociRepository := func(name, url, ref string) string {
		return `apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: ` + name + `, namespace: flux-system}
spec: {interval: 1m, url: '` + url + `', insecure: true, ref: ` + ref + `}
---
`
	}
	chartRelease := `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec:
  interval: 10m
  chartRef: {kind: OCIRepository, name: web, namespace: flux-system}
  values: {name: from-release}
`
	tests := []struct {
		name, more, unit string
		offline          bool
		// want is the ConfigMap applied; else problem is in the Problem.
		want, problem string
		unpredictable bool
	}{
		{name: "Kustomization", more: ociRepository("app", "oci://"+host+"/manifests/app", "{semver: 1.x}") + appKustomization("OCIRepository", "app"),
			unit: "Kustomization flux-system/app", want: "from-oci"},
		{name: "HelmRelease chartRef", more: ociRepository("web", "oci://"+host+"/charts/web", "{tag: 1.0.0}") + chartRelease,
			unit: "HelmRelease apps/web", want: "from-release"},
		{name: "a missing tag", more: ociRepository("app", "oci://"+host+"/manifests/app", "{tag: v2}") + appKustomization("OCIRepository", "app"),
			unit: "Kustomization flux-system/app", problem: "OCIRepository flux-system/app: failed to determine artifact digest"},
		{name: "an artifact without chart", more: ociRepository("web", "oci://"+host+"/manifests/app", "{tag: v1.0.0}") + chartRelease,
			unit: "HelmRelease apps/web", problem: "the artifact holds no Helm chart"},
		{name: "offline", more: ociRepository("app", "oci://"+host+"/manifests/app", "{tag: v1.0.0}") + appKustomization("OCIRepository", "app"),
			unit: "Kustomization flux-system/app", offline: true, problem: "oci://" + host + "/manifests/app", unpredictable: true},
		{name: "an OCIRepository that is not there", more: appKustomization("OCIRepository", "app"),
			unit: "Kustomization flux-system/app", problem: "OCIRepository flux-system/app is not in the repository"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fluxCluster(t, tc.more)
			opts := offline(t, root)
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
				return
			}
			if !applies(worlds[0], u.Unit, "ConfigMap/"+tc.want) {
				t.Fatalf("ConfigMap/%s not applied; problem %v", tc.want, u.Problem)
			}
			for _, o := range worlds[0].Objects {
				if o.Source.Unit == u.Unit && !regexp.MustCompile(`^oci://[^@]+@([^@]+@)?sha256:[0-9a-f]{12}//`).MatchString(o.Source.File) {
					t.Errorf("position %s does not name the artifact", o.Source)
				}
			}
		})
	}
}

// Options.RegistryConfig's credentials reach OCIRepositories and Helm
// OCI charts alike; a registry refusing access makes the unit
// Unpredictable.
func TestOCIRegistryCredentials(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // not the user's Docker logins
	const password = "reg-pa55word"
	reg := ocitest.NewRegistry(t)
	reg.Push(t, "manifests/app", "v1.0.0", ocitest.Layer{MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip",
		Data: ocitest.TarGz(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-oci, namespace: default}\n"})})
	reg.RequireBasicAuth("truce", password)
	more := `apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: app, namespace: flux-system}
spec: {interval: 1m, url: 'oci://` + reg.Host() + `/manifests/app', insecure: true, ref: {tag: v1.0.0}}
---
` + appKustomization("OCIRepository", "app")
	// source-controller's own credentials: a docker-registry Secret the
	// repository holds in plain data, or a cloud provider's identity.
	secret := func(user, pass string) string {
		raw, err := os.ReadFile(reg.DockerConfig(t, user, pass))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Replace(more, "insecure: true,", "insecure: true, secretRef: {name: regcred},", 1) + `
---
apiVersion: v1
kind: Secret
metadata: {name: regcred, namespace: flux-system}
type: kubernetes.io/dockerconfigjson
data: {.dockerconfigjson: ` + base64.StdEncoding.EncodeToString(raw) + `}
`
	}
	for _, tc := range []struct {
		name, config, repo, problem string
	}{
		{"right credentials", reg.DockerConfig(t, "truce", password), more, ""},
		{"wrong credentials", reg.DockerConfig(t, "truce", "nope"), more, "the registry refused access with the credentials of --registry-config"},
		{"the OCIRepository's Secret", "", secret("truce", password), ""},
		// Only the Secret's credentials are sent, as source-controller
		// sends them: --registry-config's right ones are not tried.
		{"a wrong Secret of the OCIRepository", reg.DockerConfig(t, "truce", password), secret("truce", "nope"), "the registry refused access with the credentials of Secret flux-system/regcred:"},
		{"a Secret not in the repository", "", strings.Replace(more, "insecure: true,", "insecure: true, secretRef: {name: elsewhere},", 1),
			"spec.secretRef elsewhere is not in the repository as plain data: pass its .dockerconfigjson with --registry-config"},
		{"a cloud provider", "", strings.Replace(more, "insecure: true,", "insecure: true, provider: aws,", 1),
			"spec.provider aws signs in with the cluster's cloud identity, which truce does not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fluxCluster(t, tc.repo)
			opts := offline(t, root)
			opts.Render.Offline = false
			opts.RegistryConfig = tc.config
			worlds, err := Load(t.Context(), []string{filepath.Join(root, "clusters", "prod")}, opts)
			if err != nil {
				t.Fatal(err)
			}
			u := units(worlds[0])["Kustomization flux-system/app"]
			if u == nil {
				t.Fatalf("no Kustomization flux-system/app among %v", keys(units(worlds[0])))
			}
			if tc.problem == "" {
				if !applies(worlds[0], u.Unit, "ConfigMap/from-oci") {
					t.Fatalf("ConfigMap/from-oci not applied; problem %v", u.Problem)
				}
				return
			}
			if _, ok := render.AsUnpredictable(u.Problem); !ok || !strings.Contains(u.Problem.Error(), tc.problem) || !strings.Contains(u.Problem.Error(), reg.Host()) {
				t.Fatalf("problem %v, want Unpredictable with %q naming %s", u.Problem, tc.problem, reg.Host())
			}
		})
	}
}
