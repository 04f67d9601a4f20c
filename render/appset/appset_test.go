package appset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/render"
)

func applicationSet(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte("apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: set, namespace: argocd}\nspec:\n"+spec), &obj); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// A repository for git generators.
func repository(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"apps/guestbook/cm.yaml":                "kind: ConfigMap",
		"apps/web_ui/cm.yaml":                   "kind: ConfigMap",
		"apps/.hidden/cm.yaml":                  "kind: ConfigMap",
		"clusters/dev/config.yaml":              "cluster: {name: dev, address: 'https://dev'}\n",
		"clusters/prod/config.yaml":             "- cluster: {name: prod-a}\n- cluster: {name: prod-b}\n",
		"clusters/old/config.yaml":              "cluster: {name: old}\n",
		"clusters/dev/values/other.yaml":        "x: y\n",
		"clusters/staging/nested/x/config.yaml": "cluster: {name: staging}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestExpand(t *testing.T) {
	repo := repository(t)
	const template = `  template:
    metadata: {name: '{{name}}', namespace: elsewhere, labels: {team: '{{name}}'}}
    spec:
      project: default
      source: {repoURL: 'https://git.example.com/x.git', path: 'apps/{{name}}'}
      destination: {server: 'https://kubernetes.default.svc', namespace: '{{name}}'}
`
	for _, tc := range []struct {
		name string
		spec string
		max  int
		// want maps each Application, in order, to a field path and
		// its value ("a.b.c=v"); err is a part of the error.
		want          [][]string
		err           string
		unpredictable bool
	}{
		{name: "list", spec: "  generators:\n  - list: {elements: [{name: a}, {name: b}]}\n" + template, want: [][]string{
			{"metadata.name=a", "metadata.namespace=argocd", "metadata.labels.team=a", "spec.source.path=apps/a", "metadata.finalizers=[resources-finalizer.argocd.argoproj.io]"},
			{"metadata.name=b", "spec.destination.namespace=b"}}},
		{name: "preserveResourcesOnDeletion: no finalizer", spec: "  syncPolicy: {preserveResourcesOnDeletion: true}\n  generators:\n  - list: {elements: [{name: a}]}\n" + template,
			want: [][]string{{"metadata.name=a", "metadata.finalizers=<none>"}}},
		// RenderTemplateParams returns a template without parameters
		// as it is.
		{name: "no parameters: the template as written", spec: "  generators:\n  - list: {elements: [{}]}\n" + template,
			want: [][]string{{"metadata.name={{name}}", "metadata.namespace=argocd", "metadata.finalizers=<none>"}}},
		{name: "goTemplate", spec: "  goTemplate: true\n  goTemplateOptions: [missingkey=error]\n  generators:\n  - list: {elements: [{name: a, k: 2}]}\n" +
			strings.ReplaceAll(template, "{{name}}", "{{.name}}-{{add .k 1}}"), want: [][]string{{"metadata.name=a-3", "spec.source.path=apps/a-3"}}},
		{name: "goTemplate missingkey=error", spec: "  goTemplate: true\n  goTemplateOptions: [missingkey=error]\n  generators:\n  - list: {elements: [{other: a}]}\n" +
			strings.ReplaceAll(template, "{{name}}", "{{.name}}"), err: `map has no entry for key "name"`},
		// mergeGeneratorTemplate: the generator's template wins where it
		// sets a field.
		{name: "generator template", spec: `  generators:
  - list:
      elements: [{name: a}]
      template:
        metadata: {name: 'own-{{name}}'}
        spec: {source: {path: 'own/{{name}}'}}
` + template, want: [][]string{{"metadata.name=own-a", "spec.source.path=own/a", "spec.source.repoURL=https://git.example.com/x.git", "spec.project=default", "metadata.labels.team=a"}}},
		{name: "templatePatch", spec: `  goTemplate: true
  generators:
  - list: {elements: [{name: a, auto: true}, {name: b, auto: false}]}
` + strings.ReplaceAll(template, "{{name}}", "{{.name}}") + `  templatePatch: |
    metadata: {annotations: {a: '{{ .name }}'}, finalizers: [x]}
    spec:
      project: changed
      {{- if .auto }}
      syncPolicy: {automated: {prune: true}}
      {{- end }}
`, want: [][]string{
			{"metadata.annotations.a=a", "spec.syncPolicy.automated.prune=true", "spec.project=default", "metadata.finalizers=[x resources-finalizer.argocd.argoproj.io]"},
			{"metadata.annotations.a=b", "spec.syncPolicy=<none>"}}},
		{name: "two generators in order", spec: "  generators:\n  - list: {elements: [{name: b}]}\n  - list: {elements: [{name: a}]}\n" + template,
			want: [][]string{{"metadata.name=b"}, {"metadata.name=a"}}},
		{name: "selector", spec: "  generators:\n  - list: {elements: [{name: a, env: dev}, {name: b, env: prod}]}\n    selector: {matchLabels: {env: prod}}\n" + template,
			want: [][]string{{"metadata.name=b"}}},
		{name: "git directories", spec: `  generators:
  - git:
      repoURL: https://git.example.com/x.git
      revision: HEAD
      requeueAfterSeconds: 60
      directories: [{path: 'apps/*'}]
  template:
    metadata: {name: '{{path.basenameNormalized}}'}
    spec: {project: default, source: {path: '{{path}}'}, destination: {namespace: '{{path[1]}}'}}
`, want: [][]string{{"metadata.name=guestbook", "spec.source.path=apps/guestbook"}, {"metadata.name=web-ui", "spec.destination.namespace=web_ui"}}},
		{name: "git files", spec: `  goTemplate: true
  generators:
  - git:
      repoURL: https://git.example.com/x.git
      files: [{path: 'clusters/**/config.yaml'}, {path: clusters/old, exclude: true}]
      values: {addr: '{{ .cluster.address | default "none" }}'}
  template:
    metadata: {name: '{{.cluster.name}}'}
    spec: {project: default, source: {path: '{{.path.path}}'}, destination: {server: '{{.values.addr}}', namespace: '{{index .path.segments 1}}'}}
`, want: [][]string{
			{"metadata.name=dev", "spec.source.path=clusters/dev", "spec.destination.server=https://dev"},
			{"metadata.name=prod-a", "spec.destination.server=none"},
			{"metadata.name=prod-b", "spec.destination.namespace=prod"},
			{"metadata.name=staging", "spec.source.path=clusters/staging/nested/x"}}},
		{name: "duplicate names", spec: "  generators:\n  - list: {elements: [{name: a}, {name: a}]}\n" + template,
			err: "ApplicationSet argocd/set generates Applications with duplicate names (a)"},
		{name: "no name", spec: "  generators:\n  - list: {elements: [{name: ''}]}\n" + template, err: "an Application with no name"},
		{name: "bounded", max: 2, spec: "  generators:\n  - list: {elements: [{name: a}, {name: b}, {name: c}]}\n" + template, err: "more than 2 Applications"},
		{name: "clusters", spec: "  generators:\n  - list: {elements: [{name: a}]}\n  - clusters: {}\n" + template, unpredictable: true,
			err: "ApplicationSet argocd/set: the clusters generator needs Argo CD's cluster secrets; its Applications are not checked"},
		{name: "clusters in a matrix", spec: "  generators:\n  - matrix: {generators: [{list: {elements: []}}, {clusters: {}}]}\n" + template, unpredictable: true,
			err: "ApplicationSet argocd/set: the clusters generator needs Argo CD's cluster secrets"},
		{name: "matrix", spec: `  generators:
  - matrix:
      generators: [{list: {elements: [{env: dev}]}}, {git: {repoURL: 'https://git.example.com/x.git', directories: [{path: 'apps/*'}]}}]
      template: {metadata: {name: '{{env}}-{{path.basename}}'}}
` + template, want: [][]string{{"metadata.name=dev-guestbook", "spec.source.path=apps/{{name}}"}, {"metadata.name=dev-web_ui"}}},
		{name: "other repository", spec: "  generators:\n  - git: {repoURL: 'https://other.example.com/y.git', directories: [{path: '*'}]}\n" + template, unpredictable: true, err: "other.example.com"},
		{name: "slugify", spec: "  goTemplate: true\n  generators:\n  - list: {elements: [{name: Feature/A_B}]}\n" + strings.ReplaceAll(template, "{{name}}", "{{slugify .name}}"),
			want: [][]string{{"metadata.name=feature-a-b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{MaxApplications: tc.max, Repository: func(_ context.Context, url, _ string) (string, error) {
				if url == "https://git.example.com/x.git" {
					return repo, nil
				}
				return "", &render.Unpredictable{Subject: "repository " + url, Reason: "needs the network (--offline)"}
			}}
			apps, err := Expand(context.Background(), applicationSet(t, tc.spec), opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				var up *render.Unpredictable
				if errors.As(err, &up) != tc.unpredictable {
					t.Errorf("Unpredictable: %v, want %v", !tc.unpredictable, tc.unpredictable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(apps) != len(tc.want) {
				t.Fatalf("%d Applications, want %d: %v", len(apps), len(tc.want), apps)
			}
			for i, fields := range tc.want {
				if apps[i].GetKind() != "Application" || apps[i].GetAPIVersion() != "argoproj.io/v1alpha1" {
					t.Errorf("[%d] is %s %s", i, apps[i].GetAPIVersion(), apps[i].GetKind())
				}
				for _, f := range fields {
					path, want, _ := strings.Cut(f, "=")
					if got := field(apps[i].Object, strings.Split(path, ".")); got != want {
						t.Errorf("[%d] %s = %s, want %s", i, path, got, want)
					}
				}
			}
		})
	}
}

func field(obj map[string]any, path []string) string {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, path...)
	if !ok {
		return "<none>"
	}
	if l, ok := v.([]any); ok {
		var s []string
		for _, x := range l {
			s = append(s, x.(string))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return "?"
}

// Argo CD's Test_ApplyTemplatePatch "patch with JSON": maps merge, the
// patch's lists are taken (finalizers, merged, aside).
func TestApplyPatch(t *testing.T) {
	app := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "my-cluster-guestbook", "namespace": "namespace", "finalizers": []any{resourcesFinalizer}},
		"spec": map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": "https://github.com/argoproj/argocd-example-apps.git", "targetRevision": "HEAD", "path": "guestbook"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "guestbook"}}}
	got, err := applyPatch(app, `{
		"metadata": {"annotations": {"annotation-some-key": "annotation-some-value"}},
		"spec": {"source": {"helm": {"valueFiles": ["values.test.yaml", "values.big.yaml"]}}, "syncPolicy": {"automated": {"prune": true}}}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "my-cluster-guestbook", "namespace": "namespace", "finalizers": []any{resourcesFinalizer},
			"annotations": map[string]any{"annotation-some-key": "annotation-some-value"}},
		"spec": map[string]any{"project": "default",
			"source": map[string]any{"repoURL": "https://github.com/argoproj/argocd-example-apps.git", "targetRevision": "HEAD", "path": "guestbook",
				"helm": map[string]any{"valueFiles": []any{"values.test.yaml", "values.big.yaml"}}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
			"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n %v\nwant\n %v", got, want)
	}
	if _, err := applyPatch(app, "- not a map"); err == nil {
		t.Error("a list patch is no error")
	}
}
