package cli

import (
	"strings"
	"testing"
)

// syncChart is a chart whose ConfigMap's name shows the values it got and
// names no namespace; it creates the release's namespace.
var syncChart = map[string]string{
	"charts/shop/Chart.yaml":       "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
	"charts/shop/values.yaml":      "mode: blue\ntag: \"1\"\n",
	"charts/shop/values-prod.yaml": "mode: green\n",
	"charts/shop/templates/namespace.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: {{ .Release.Namespace }}
`,
	"charts/shop/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-{{ .Values.mode }}-{{ .Values.tag }}
`,
	"charts/broken/Chart.yaml":        "apiVersion: v2\nname: broken\nversion: 0.1.0\n",
	"charts/broken/templates/cm.yaml": "{{ .Values.missing.deep }}\n",
	"jsonnet/shop/main.jsonnet":       "function(mode) { apiVersion: 'v1', kind: 'List', items: [\n  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } },\n  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: std.extVar('name') + '-' + mode + '-' + (import 'tag.libsonnet'), namespace: 'shop' } },\n] }\n",
	"jsonnet/lib/tag.libsonnet":       "'7'\n",
	"apps/argo/application.yaml":      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: argocd\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: shop\n  namespace: argocd\nspec:\n  source: {repoURL: https://example.com/fleet, path: charts/shop}\n",
}

func TestSyncRendersHelmAndJsonnet(t *testing.T) {
	repo := syncRepo(t, syncChart)
	for _, tt := range []struct {
		name    string
		args    []string
		code    int
		actions map[string]string
		out     []string // in stdout, or stderr when the pass fails
	}{
		{
			name: "a chart with its defaults: the sync's name and namespace", args: []string{repo + "//charts/shop", "--once"},
			actions: map[string]string{"Namespace/truce-system": "Created", "ConfigMap/truce-system/truce-blue-1": "Created"},
			out:     []string{"charts/shop/templates/cm.yaml (helm chart fleet@", "2 created"},
		},
		{
			name: "a chart with a values file, a value set, a release name and namespace",
			args: []string{repo + "//charts/shop", "--once", "--helm-values", "values-prod.yaml", "--helm-set", "tag=2.3",
				"--helm-release-name", "web", "--helm-namespace", "shop"},
			actions: map[string]string{"Namespace/shop": "Created", "ConfigMap/shop/web-green-2.3": "Created"},
		},
		{
			name:    "a Jsonnet directory with an external variable, a top-level argument and a library",
			args:    []string{repo + "//jsonnet/shop", "--once", "--jsonnet-ext-var", "name=settings", "--jsonnet-tla", "mode=red", "--jsonnet-lib", "jsonnet/lib"},
			actions: map[string]string{"Namespace/shop": "Created", "ConfigMap/shop/settings-red-7": "Created"},
			out:     []string{"jsonnet/shop/main.jsonnet"},
		},
		{
			name: "an Application is applied as an object", args: []string{repo + "//apps/argo", "--once", "--dry-run"}, code: exitFound,
			actions: map[string]string{"Application.argoproj.io/argocd/shop": "Created"},
		},
		{
			name: "a chart that fails to render fails the pass", args: []string{repo + "//charts/broken", "--once"}, code: exitFailure,
			out: []string{"broken/templates/cm.yaml", "nil pointer"},
		},
		{
			name: "a --helm-set without a value", args: []string{repo + "//charts/shop", "--once", "--helm-set", "tag"}, code: exitFailure,
			out: []string{`--helm-set "tag": want key=value`},
		},
		{
			name: "an invalid release name", args: []string{repo + "//charts/shop", "--once", "--helm-release-name", "Web_1"}, code: exitFailure,
			out: []string{`--helm-release-name "Web_1"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runSyncOn(t, nil, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			got := actionsOf(out)
			for ref, want := range tt.actions {
				if got[ref] != want {
					t.Errorf("%s: %q, want %q\n%s", ref, got[ref], want, out)
				}
			}
			for _, s := range tt.out {
				if !strings.Contains(out+errOut, s) {
					t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", s, out, errOut)
				}
			}
		})
	}
}
