package world

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/truce-dev/truce/render"
)

// An app of apps given as a relative path is followed as it is given as
// an absolute one. A relative path once made every Application look like
// a hand-made layout (its path "beside" the directory could not be
// placed in the repository), so nothing was followed and each
// Application applied nothing, silently.
func TestRelativeEntryPath(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps", "app.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: guestbook, namespace: argocd}
spec:
  project: default
  source: {repoURL: 'https://git.example.com/other.git', path: guestbook, targetRevision: HEAD}
  destination: {server: https://kubernetes.default.svc, namespace: guestbook}
`)
	load := func(path string) *Unit {
		t.Helper()
		worlds, err := Load(context.Background(), []string{path}, offline(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		u := units(worlds[0])["Application argocd/guestbook"]
		if u == nil {
			t.Fatalf("%s: the Application is not followed (units %v)", path, keys(units(worlds[0])))
		}
		return u
	}
	abs := load(filepath.Join(dir, "apps"))
	t.Chdir(dir)
	rel := load("apps")
	for name, u := range map[string]*Unit{"absolute": abs, "relative": rel} {
		if _, ok := render.AsUnpredictable(u.Problem); !ok {
			t.Errorf("%s path: want the other repository Unpredictable offline, got %v", name, u.Problem)
		}
	}
}

// A repository of several apps read from its top: a Helm chart below the
// path is rendered (not its templates and values files read as
// manifests), and a chart whose dependency cannot be fetched offline is
// left out with a note instead of failing the whole read.
func TestChartsBelowEntryPath(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "plain", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n")
	writeFile(t, filepath.Join(dir, "web", "Chart.yaml"), "apiVersion: v2\nname: web\nversion: 0.1.0\n")
	writeFile(t, filepath.Join(dir, "web", "values.yaml"), "name: from-values\n")
	writeFile(t, filepath.Join(dir, "web", "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}-{{ .Release.Name }}\n")
	writeFile(t, filepath.Join(dir, "deps", "Chart.yaml"), `apiVersion: v2
name: deps
version: 0.1.0
dependencies:
- {name: wordpress, version: 9.0.3, repository: https://charts.example.com/stable}
`)
	worlds, err := Load(context.Background(), []string{dir}, offline(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(worlds) != 1 {
		t.Fatalf("got %d worlds, want 1", len(worlds))
	}
	var got []string
	for _, o := range worlds[0].Objects {
		rel, _ := filepath.Rel(dir, o.Source.File)
		got = append(got, filepath.ToSlash(rel)+" "+o.Object.GetKind()+"/"+o.Object.GetName())
	}
	slices.Sort(got)
	want := []string{"plain/cm.yaml ConfigMap/plain", "web/templates/cm.yaml ConfigMap/from-values-web"}
	if !slices.Equal(got, want) {
		t.Errorf("objects\ngot  %q\nwant %q", got, want)
	}
	notes := strings.Join(worlds[0].Notes, "\n")
	if !strings.Contains(notes, "deps: Helm chart not read") || !strings.Contains(notes, "wordpress") {
		t.Errorf("no note names the chart left out and its dependency: %q", worlds[0].Notes)
	}
}
