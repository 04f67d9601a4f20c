package world

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A unit rendering a chart of the repository says where its values are
// written: the inline values' pointer (per source of a multi-source
// Application), the values files in Helm's order, and a probe render.
func TestValuesTarget(t *testing.T) {
	const url = "https://git.example.com/platform.git"
	root := t.TempDir()
	files := map[string]string{
		"chart/Chart.yaml":           "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"chart/values.yaml":          "image: nginx\n",
		"chart/templates/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {image: {{ .Values.image | quote }}}\n",
		"env/values.yaml":            "image: ghcr.io/acme/nginx\n",
		"single/app.yaml":            app("source", "  source:\n    repoURL: "+url+"\n    path: chart\n    helm:\n      valueFiles: [/env/values.yaml]\n"),
		"multi/app.yaml":             app("multi", "  sources:\n    - repoURL: "+url+"\n      path: chart\n      helm:\n        valueFiles: [$values/env/values.yaml]\n    - repoURL: "+url+"\n      ref: values\n"),
		"flux/hr.yaml":               "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: web}\nspec:\n  chart:\n    spec:\n      chart: ./chart\n      sourceRef: {kind: GitRepository, name: repo}\n",
		"flux/repo.yaml":             "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: repo, namespace: web}\nspec:\n  url: " + url + "\n  ref: {branch: main}\n",
		"flux-valuesfiles/hr.yaml":   "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: web}\nspec:\n  chart:\n    spec:\n      chart: ./chart\n      valuesFiles: [./chart/values.yaml, ./env/values.yaml, ./env/missing.yaml]\n      ignoreMissingValuesFiles: true\n      sourceRef: {kind: GitRepository, name: repo}\n",
		"flux-valuesfiles/repo.yaml": "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: repo, namespace: web}\nspec:\n  url: " + url + "\n  ref: {branch: main}\n",
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chartValues, envValues := filepath.Join(root, "chart", "values.yaml"), filepath.Join(root, "env", "values.yaml")
	cases := []struct {
		dir, unit              string
		pointer, postRenderers string
		files                  []ValuesFile
	}{
		{"single", "Application argocd/source", "/spec/source/helm/valuesObject", "", []ValuesFile{{Path: chartValues}, {Path: envValues}}},
		{"multi", "Application argocd/multi", "/spec/sources/0/helm/valuesObject", "", []ValuesFile{{Path: chartValues}, {Path: envValues}}},
		{"flux", "HelmRelease web/web", "/spec/values", "/spec/postRenderers", []ValuesFile{{Path: chartValues}}},
		// The chart's valuesFiles replace its values.yaml, merged in order.
		{"flux-valuesfiles", "HelmRelease web/web", "/spec/values", "/spec/postRenderers", []ValuesFile{{Path: chartValues}, {Path: envValues}}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			worlds, err := Load(context.Background(), []string{filepath.Join(root, tc.dir)}, offline(t, root, url))
			if err != nil {
				t.Fatal(err)
			}
			u := units(worlds[0])[tc.unit]
			if u == nil || u.Problem != nil || u.Values == nil {
				t.Fatalf("unit %s: %+v (units %v)", tc.unit, u, units(worlds[0]))
			}
			v := u.Values
			if v.Pointer != tc.pointer || v.PostRenderers != tc.postRenderers || v.Reason != "" {
				t.Errorf("pointer %q, post-renderers %q, reason %q", v.Pointer, v.PostRenderers, v.Reason)
			}
			if !reflect.DeepEqual(v.Files, tc.files) {
				t.Errorf("files %+v, want %+v", v.Files, tc.files)
			}
			objs, err := v.Probe(map[string]any{"image": "probe"})
			if err != nil || len(objs) != 1 || objs[0].Object.Object["data"].(map[string]any)["image"] != "probe" {
				t.Errorf("probe render: %v %+v", err, objs)
			}
		})
	}
}

func app(name, source string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\nspec:\n  destination: {namespace: web, server: https://kubernetes.default.svc}\n" + source
}
