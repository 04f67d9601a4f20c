package world

import (
	"context"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

func offline(t *testing.T, root string, urls ...string) Options {
	t.Helper()
	return Options{
		Render:   render.Options{Offline: true, CacheDir: t.TempDir()},
		RepoURLs: urls,
		Root:     root,
	}
}

func units(w *World) map[string]*Unit {
	out := map[string]*Unit{}
	for _, u := range w.Units {
		out[u.Unit.String()] = u
	}
	return out
}

// The Argo CD example repository: apps/ is a Helm chart (an app of apps)
// rendering one Application per example, each followed into its
// directory and rendered as Argo CD's repo-server would.
func TestArgoCDExampleApps(t *testing.T) {
	root := filepath.Join("testdata", "argocd-example-apps")
	worlds, err := Load(context.Background(), []string{filepath.Join(root, "apps")},
		offline(t, root, "https://github.com/argoproj/argocd-example-apps.git"))
	if err != nil {
		t.Fatal(err)
	}
	if len(worlds) != 1 {
		t.Fatalf("got %d worlds, want 1", len(worlds))
	}
	w := worlds[0]
	got := units(w)
	rendered := map[string]string{ // unit → a kind/name it must apply
		"Application argocd/example.guestbook":             "Deployment/guestbook-ui",
		"Application argocd/example.helm-guestbook":        "Deployment/helm-guestbook",
		"Application argocd/example.kustomize-guestbook":   "Deployment/kustomize-guestbook-ui",
		"Application argocd/example.jsonnet-guestbook":     "Deployment/jsonnet-guestbook-ui",
		"Application argocd/example.jsonnet-guestbook-tla": "Deployment/jsonnet-guestbook-ui",
		"Application argocd/example.sock-shop":             "Deployment/front-end",
		"Application argocd/example.sync-waves":            "ReplicaSet/backend",
	}
	for name, want := range rendered {
		u, ok := got[name]
		if !ok {
			t.Errorf("%s not followed; units: %v", name, keys(got))
			continue
		}
		if u.Problem != nil {
			t.Errorf("%s: %v", name, u.Problem)
			continue
		}
		if !applies(w, u.Unit, want) {
			t.Errorf("%s does not apply %s", name, want)
		}
	}
	for _, name := range []string{"Application argocd/example.plugin-kasane", "Application argocd/example.plugin-nix", "Application argocd/example.helm-dependency"} {
		u, ok := got[name]
		if !ok {
			t.Errorf("%s not followed", name)
			continue
		}
		up, ok := render.AsUnpredictable(u.Problem)
		if !ok {
			t.Errorf("%s: want Unpredictable, got %v", name, u.Problem)
			continue
		}
		if strings.Contains(name, "helm-dependency") && !strings.Contains(up.Error(), "wordpress") {
			t.Errorf("%s: the message does not name the chart: %s", name, up)
		}
	}
	if len(w.Base) == 0 {
		t.Errorf("CreateNamespace=true created no namespace")
	}
}

// Flux's example: two clusters, each its own world; the bootstrap
// placeholder is synthesized, the ArtifactGenerator's artifacts built,
// HelmReleases from remote charts Unpredictable offline.
func TestFluxKustomizeHelmExample(t *testing.T) {
	root := filepath.Join("testdata", "flux2-kustomize-helm-example")
	worlds, err := Load(context.Background(), []string{root}, offline(t, root))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range worlds {
		names = append(names, w.Name)
	}
	if strings.Join(names, ",") != "clusters/production,clusters/staging" {
		t.Fatalf("worlds %v, want clusters/production and clusters/staging", names)
	}
	for _, w := range worlds {
		got := units(w)
		for _, name := range []string{"Kustomization flux-system/flux-system", "Kustomization flux-system/apps", "Kustomization flux-system/infra-controllers", "Kustomization flux-system/infra-configs"} {
			u, ok := got[name]
			if !ok {
				t.Errorf("%s: %s not followed; units: %v", w.Name, name, keys(got))
				continue
			}
			if u.Problem != nil {
				t.Errorf("%s: %s: %v", w.Name, name, u.Problem)
			}
		}
		for _, name := range []string{"HelmRelease podinfo/podinfo", "HelmRelease cert-manager/cert-manager"} {
			u, ok := got[name]
			if !ok {
				t.Errorf("%s: %s not followed; units: %v", w.Name, name, keys(got))
				continue
			}
			if _, ok := render.AsUnpredictable(u.Problem); !ok {
				t.Errorf("%s: %s: want Unpredictable offline, got %v", w.Name, name, u.Problem)
			}
		}
		if len(w.Notes) == 0 {
			t.Errorf("%s: the synthesized bootstrap is not noted", w.Name)
		}
		// Positions point at the repository's files the artifact copied,
		// this cluster's overlay even where both overlays' files are
		// identical.
		cluster := strings.TrimPrefix(w.Name, "clusters/")
		if u := got["HelmRelease podinfo/podinfo"]; u != nil {
			want := filepath.Join("apps", cluster, "kustomization.yaml")
			if !strings.HasSuffix(u.Source.Kustomization, want) || !strings.HasSuffix(u.Source.File, filepath.Join("apps", "base", "podinfo", "release.yaml")) {
				t.Errorf("%s: HelmRelease podinfo at %s, want apps/base/podinfo/release.yaml built by %s", w.Name, u.Source, want)
			}
		}
		// infra-configs comes after infra-controllers, apps after both.
		pos := map[string]int{}
		for i, u := range w.Units {
			pos[u.Name] = i
		}
		if !(pos["infra-controllers"] < pos["infra-configs"] && pos["infra-configs"] < pos["apps"]) {
			t.Errorf("%s: units not in dependsOn order: %v", w.Name, pos)
		}
	}
}

// A directory of hand-made settings whose repository truce cannot tell
// is read as it is: one unnamed world, nothing followed.
func TestHandMadeLayoutIsReadAsItIs(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "image-mirror")
	worlds, err := Load(context.Background(), []string{dir}, offline(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(worlds) != 1 || worlds[0].Name != "" || worlds[0].Followed() {
		t.Fatalf("got %+v, want one unnamed world", worlds)
	}
	want, err := manifest.LoadPaths(context.Background(), []string{dir}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(worlds[0].Objects) != len(want) {
		t.Errorf("%d objects, want %d", len(worlds[0].Objects), len(want))
	}
}

func applies(w *World, u manifest.Unit, kindName string) bool {
	for _, o := range w.Objects {
		if o.Source.Unit == u && o.Object.GetKind()+"/"+o.Object.GetName() == kindName {
			return true
		}
	}
	return false
}

func keys(m map[string]*Unit) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// An ApplicationSet whose generator truce does not run is reported
// Unpredictable, naming the generator, and the Application beside it is
// still rendered.
func TestApplicationSetIsUnpredictable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps", "set.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: guestbooks
  namespace: argocd
spec:
  generators:
  - clusters: {}
  template:
    metadata: {name: 'guestbook-{{name}}'}
    spec:
      project: default
      source: {repoURL: https://git.example.com/x.git, path: guestbook}
      destination: {server: https://kubernetes.default.svc, namespace: guestbook}
`)
	writeFile(t, filepath.Join(dir, "apps", "app.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://git.example.com/x.git, path: web}
  destination: {server: https://kubernetes.default.svc, namespace: web}
`)
	writeFile(t, filepath.Join(dir, "web", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n")
	worlds, err := Load(context.Background(), []string{filepath.Join(dir, "apps")}, offline(t, dir, "https://git.example.com/x.git"))
	if err != nil {
		t.Fatal(err)
	}
	u := units(worlds[0])["ApplicationSet argocd/guestbooks"]
	if u == nil {
		t.Fatalf("ApplicationSet not reported; units %v", keys(units(worlds[0])))
	}
	if up, ok := render.AsUnpredictable(u.Problem); !ok || !strings.Contains(up.Error(), "ApplicationSet argocd/guestbooks: the clusters generator needs Argo CD's cluster secrets; its Applications are not checked") {
		t.Errorf("ApplicationSet: %v, want Unpredictable naming its generator", u.Problem)
	}
	if !applies(worlds[0], manifest.Unit{Kind: KindApplication, Namespace: "argocd", Name: "web"}, "ConfigMap/web") {
		t.Errorf("the Application beside it is not rendered")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// An Application of another repository is rendered from a clone of it,
// and named by its URL and commit; offline it is Unpredictable.
func TestOtherRepositoryIsCloned(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("file:// clones need git-upload-pack")
	}
	other := t.TempDir()
	repo, err := git.PlainInit(other, false)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(other, "guestbook", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: guestbook}\n")
	wt, _ := repo.Worktree()
	if _, err := wt.Add("guestbook/cm.yaml"); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(0, 0)}
	if _, err := wt.Commit("one", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	url := (&neturl.URL{Scheme: "file", Path: filepath.ToSlash(other)}).String()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps", "app.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: guestbook, namespace: argocd}
spec:
  project: default
  source: {repoURL: '`+url+`', path: guestbook, targetRevision: HEAD}
  destination: {server: https://kubernetes.default.svc, namespace: guestbook}
`)
	online := offline(t, dir)
	online.Render.Offline = false
	worlds, err := Load(context.Background(), []string{filepath.Join(dir, "apps")}, online)
	if err != nil {
		t.Fatal(err)
	}
	app := manifest.Unit{Kind: KindApplication, Namespace: "argocd", Name: "guestbook"}
	if !applies(worlds[0], app, "ConfigMap/guestbook") {
		t.Fatalf("the other repository is not rendered: %v", units(worlds[0])["Application argocd/guestbook"].Problem)
	}
	for _, o := range worlds[0].Objects {
		if o.Source.Unit == app && !strings.HasPrefix(o.Source.File, url+"@") {
			t.Errorf("position %s does not name the repository", o.Source)
		}
	}
	worlds, err = Load(context.Background(), []string{filepath.Join(dir, "apps")}, offline(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := render.AsUnpredictable(units(worlds[0])["Application argocd/guestbook"].Problem); !ok {
		t.Errorf("offline: %v, want Unpredictable", units(worlds[0])["Application argocd/guestbook"].Problem)
	}
}
