package world

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// Argo CD's own ApplicationSet examples, read as the repository
// github.com/argoproj/argo-cd they live in: the Applications generated
// are those Argo CD makes, each rendered from this checkout.
func TestArgoCDApplicationSetExamples(t *testing.T) {
	root := filepath.Join("testdata", "argo-cd")
	examples := filepath.Join(root, "applicationset", "examples")
	type want struct {
		// apps maps each generated Application to a kind/name it
		// applies, "" for one that cannot be rendered offline and
		// "error" for one Argo CD cannot render either.
		apps map[string]string
		// paths are the generated Applications' spec.source.path.
		paths map[string]string
		// problem is part of the ApplicationSet's own problem, when it
		// generates nothing.
		problem       string
		unpredictable bool
	}
	guestbooks := want{
		apps: map[string]string{"engineering-dev-guestbook": "Deployment/guestbook-ui", "engineering-prod-guestbook": "Deployment/guestbook-ui"},
		paths: map[string]string{
			"engineering-dev-guestbook":  "applicationset/examples/list-generator/guestbook/engineering-dev",
			"engineering-prod-guestbook": "applicationset/examples/list-generator/guestbook/engineering-prod",
		},
	}
	addons := want{
		apps: map[string]string{"argo-workflows": "", "prometheus-operator": ""},
		paths: map[string]string{
			"argo-workflows":      "applicationset/examples/git-generator-directory/cluster-addons/argo-workflows",
			"prometheus-operator": "applicationset/examples/git-generator-directory/cluster-addons/prometheus-operator",
		},
	}
	files := "applicationset/examples/git-generator-files-discovery/apps/guestbook"
	matrix := want{
		apps: map[string]string{
			"argo-workflows-engineering-dev": "Deployment/workflow-controller", "argo-workflows-engineering-prod": "Deployment/workflow-controller",
			"prometheus-operator-engineering-dev": "", "prometheus-operator-engineering-prod": "",
		},
		paths: map[string]string{
			"argo-workflows-engineering-dev":       "applicationset/examples/matrix/cluster-addons/argo-workflows",
			"argo-workflows-engineering-prod":      "applicationset/examples/matrix/cluster-addons/argo-workflows",
			"prometheus-operator-engineering-dev":  "applicationset/examples/matrix/cluster-addons/prometheus-operator",
			"prometheus-operator-engineering-prod": "applicationset/examples/matrix/cluster-addons/prometheus-operator",
		},
	}
	// The merge of two lists (engineering-dev, engineering-prod) times
	// the matrix of two lists: 8 Applications, values merged deeply.
	union := map[string]string{}
	for _, p := range []string{"first", "second"} {
		for _, c := range []string{"engineering-dev", "engineering-prod"} {
			for _, n := range []string{"1", "2"} {
				union[p+"-"+c+"-"+n] = "Deployment/guestbook-ui"
			}
		}
	}
	for _, tc := range []struct {
		file string
		want want
	}{
		{"list-generator/list-example.yaml", guestbooks},
		{"list-generator/list-example-fasttemplate.yaml", guestbooks},
		{"git-generator-directory/git-directories-example.yaml", addons},
		{"git-generator-directory/git-directories-example-fasttemplate.yaml", addons},
		{"git-generator-directory/excludes/git-directories-exclude-example-fasttemplate.yaml", want{
			apps: map[string]string{"argo-workflows": "", "prometheus-operator": ""},
			paths: map[string]string{
				"argo-workflows":      "applicationset/examples/git-generator-directory/excludes/cluster-addons/argo-workflows",
				"prometheus-operator": "applicationset/examples/git-generator-directory/excludes/cluster-addons/prometheus-operator",
			},
		}},
		// The Go template variant writes '{{.path}}', the whole map, as
		// the source path: Argo CD generates the same Applications and
		// cannot render them either.
		{"git-generator-directory/excludes/git-directories-exclude-example.yaml", want{
			apps: map[string]string{"argo-workflows": "error", "prometheus-operator": "error"},
			paths: map[string]string{
				"argo-workflows":      "map[basename:argo-workflows basenameNormalized:argo-workflows path:applicationset/examples/git-generator-directory/excludes/cluster-addons/argo-workflows segments:[applicationset examples git-generator-directory excludes cluster-addons argo-workflows]]",
				"prometheus-operator": "map[basename:prometheus-operator basenameNormalized:prometheus-operator path:applicationset/examples/git-generator-directory/excludes/cluster-addons/prometheus-operator segments:[applicationset examples git-generator-directory excludes cluster-addons prometheus-operator]]",
			},
		}},
		{"git-generator-files-discovery/git-generator-files.yaml", want{
			apps:  map[string]string{"engineering-dev-guestbook": "Deployment/kustomize-guestbook-ui", "engineering-prod-guestbook": "Deployment/kustomize-guestbook-ui"},
			paths: map[string]string{"engineering-dev-guestbook": files, "engineering-prod-guestbook": files},
		}},
		{"git-generator-files-discovery/git-generator-files-fasttemplate.yaml", want{
			apps:  map[string]string{"engineering-dev-guestbook": "Deployment/kustomize-guestbook-ui", "engineering-prod-guestbook": "Deployment/kustomize-guestbook-ui"},
			paths: map[string]string{"engineering-dev-guestbook": files, "engineering-prod-guestbook": files},
		}},
		{"matrix/list-and-git.yaml", matrix},
		{"matrix/list-and-git-fasttemplate.yaml", matrix},
		{"matrix/matrix-and-union-in-matrix.yaml", want{apps: union}},
		// The example's template reads .path.path, which neither list
		// gives: missingkey=error stops Argo CD as it stops truce.
		{"matrix/list-and-list.yaml", want{problem: `map has no entry for key "path"`}},
		{"matrix/cluster-and-git.yaml", want{problem: "the clusters generator needs Argo CD's cluster secrets", unpredictable: true}},
		{"merge/merge-two-matrixes.yaml", want{problem: "the clusters generator needs Argo CD's cluster secrets", unpredictable: true}},
		{"git-generator-files-discovery/excludes/git-files-exclude-example.yaml", want{
			apps:  map[string]string{"engineering-prod-guestbook": "Deployment/kustomize-guestbook-ui"},
			paths: map[string]string{"engineering-prod-guestbook": files},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			worlds, err := Load(context.Background(), []string{filepath.Join(examples, filepath.FromSlash(tc.file))},
				offline(t, root, "https://github.com/argoproj/argo-cd.git"))
			if err != nil {
				t.Fatal(err)
			}
			w := worlds[0]
			var set *Unit
			apps := map[string]*Unit{}
			for _, u := range w.Units {
				switch u.Kind {
				case KindApplicationSet:
					set = u
				case KindApplication:
					apps[u.Name] = u
				}
			}
			if set == nil {
				t.Fatalf("no ApplicationSet; units %v", keys(units(w)))
			}
			if tc.want.problem != "" {
				_, up := render.AsUnpredictable(set.Problem)
				if set.Problem == nil || !strings.Contains(set.Problem.Error(), tc.want.problem) || up != tc.want.unpredictable {
					t.Errorf("ApplicationSet: %v, want %q (Unpredictable: %v)", set.Problem, tc.want.problem, tc.want.unpredictable)
				}
			} else if set.Problem != nil {
				t.Fatalf("ApplicationSet: %v", set.Problem)
			}
			var names, wantNames []string
			for n := range apps {
				names = append(names, n)
			}
			for n := range tc.want.apps {
				wantNames = append(wantNames, n)
			}
			sort.Strings(names)
			sort.Strings(wantNames)
			if !reflect.DeepEqual(names, wantNames) {
				t.Fatalf("generated %v, want %v", names, wantNames)
			}
			if set.Objects != len(wantNames) {
				t.Errorf("the ApplicationSet applies %d objects, want its %d Applications", set.Objects, len(wantNames))
			}
			for name, kindName := range tc.want.apps {
				u := apps[name]
				if u.Parent != set.Unit || u.Source.File != set.Source.File || u.Namespace != set.Namespace {
					t.Errorf("%s: parent %v at %s in %q, want the ApplicationSet %v at %s", name, u.Parent, u.Source, u.Namespace, set.Unit, set.Source)
				}
				obj := generated(w, set.Unit, name).Object
				path, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "path")
				if tc.want.paths != nil && path != tc.want.paths[name] {
					t.Errorf("%s: path %q, want %q", name, path, tc.want.paths[name])
				}
				if f := obj.GetFinalizers(); len(f) != 1 || f[0] != "resources-finalizer.argocd.argoproj.io" {
					t.Errorf("%s: finalizers %v", name, f)
				}
				_, unpredictable := render.AsUnpredictable(u.Problem)
				switch kindName {
				case "":
					if !unpredictable {
						t.Errorf("%s: %v, want Unpredictable offline", name, u.Problem)
					}
				case "error":
					if u.Problem == nil || unpredictable {
						t.Errorf("%s: %v, want an error", name, u.Problem)
					}
				default:
					if u.Problem != nil {
						t.Errorf("%s: %v", name, u.Problem)
					} else if !applies(w, u.Unit, kindName) {
						t.Errorf("%s does not apply %s", name, kindName)
					}
					if u.Values != nil {
						t.Errorf("%s: values target %+v for a directory", name, u.Values)
					}
				}
			}
		})
	}
}

// generated is the Application named name that the unit applies.
func generated(w *World, u manifest.Unit, name string) manifest.Object {
	for _, o := range w.Objects {
		if o.Source.Unit == u && o.Object.GetKind() == KindApplication && o.Object.GetName() == name {
			return o
		}
	}
	return manifest.Object{Object: &unstructured.Unstructured{}}
}

// Generators truce does not run leave the ApplicationSet Unpredictable,
// named; a git generator of another repository needs it cloned.
func TestApplicationSetUnpredictable(t *testing.T) {
	for _, tc := range []struct{ generator, want string }{
		{"clusters: {}", "the clusters generator needs Argo CD's cluster secrets"},
		{"scmProvider: {github: {organization: o}}", "scmProvider"},
		{"pullRequest: {github: {owner: o, repo: r}}", "pullRequest"},
		{"clusterDecisionResource: {configMapRef: c}", "clusterDecisionResource"},
		{"plugin: {configMapRef: {name: p}}", "plugin"},
		{"git: {repoURL: 'https://git.example.com/other.git', revision: HEAD, directories: [{path: '*'}]}", "repository https://git.example.com/other.git: needs the network"},
	} {
		t.Run(tc.generator, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "apps", "set.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: x, namespace: argocd}
spec:
  generators:
  - `+tc.generator+`
  template:
    metadata: {name: 'x-{{name}}'}
    spec:
      project: default
      source: {repoURL: https://git.example.com/x.git, path: guestbook}
      destination: {server: https://kubernetes.default.svc, namespace: guestbook}
`)
			worlds, err := Load(context.Background(), []string{filepath.Join(dir, "apps")}, offline(t, dir, "https://git.example.com/x.git"))
			if err != nil {
				t.Fatal(err)
			}
			u := units(worlds[0])["ApplicationSet argocd/x"]
			if u == nil {
				t.Fatalf("ApplicationSet not reported; units %v", keys(units(worlds[0])))
			}
			if up, ok := render.AsUnpredictable(u.Problem); !ok || !strings.Contains(up.Error(), tc.want) {
				t.Errorf("ApplicationSet: %v, want Unpredictable naming %q", u.Problem, tc.want)
			}
			if len(worlds[0].Units) != 1 {
				t.Errorf("units %v, want the ApplicationSet only", keys(units(worlds[0])))
			}
		})
	}
}

// A generated Application rendering a chart says its values are written
// in the ApplicationSet's template, not at its position; an
// ApplicationSet generating nothing is noted.
func TestGeneratedApplicationValues(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps", "set.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: charts, namespace: argocd}
spec:
  generators:
  - git:
      repoURL: https://git.example.com/x.git
      directories: [{path: 'charts/*'}]
  template:
    metadata: {name: '{{path.basename}}'}
    spec:
      project: default
      source: {repoURL: https://git.example.com/x.git, path: '{{path}}', helm: {valuesObject: {replicas: 2}}}
      destination: {server: https://kubernetes.default.svc, namespace: '{{path.basename}}'}
---
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: empty, namespace: argocd}
spec:
  generators:
  - list: {elements: []}
  template:
    metadata: {name: x}
    spec: {project: default}
`)
	writeFile(t, filepath.Join(dir, "charts", "web", "Chart.yaml"), "apiVersion: v2\nname: web\nversion: 1.0.0\n")
	writeFile(t, filepath.Join(dir, "charts", "web", "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {replicas: '{{ .Values.replicas }}'}\n")
	worlds, err := Load(context.Background(), []string{filepath.Join(dir, "apps")}, offline(t, dir, "https://git.example.com/x.git"))
	if err != nil {
		t.Fatal(err)
	}
	w := worlds[0]
	u := units(w)["Application argocd/web"]
	if u == nil || u.Problem != nil {
		t.Fatalf("Application web: %+v; units %v", u, keys(units(w)))
	}
	if !applies(w, u.Unit, "ConfigMap/web") || u.Values == nil || !strings.Contains(u.Values.Reason, "generated by ApplicationSet charts") {
		t.Errorf("values target %+v", u.Values)
	}
	if !strings.Contains(strings.Join(w.Notes, "\n"), "ApplicationSet empty generates no Application") {
		t.Errorf("notes %v", w.Notes)
	}
}
