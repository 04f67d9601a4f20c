package world

import (
	"errors"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// gitHTTPServer serves the repositories under root with git http-backend
// (smart HTTP) on a loopback address, answering 401 to requests without
// the basic credentials git/password. It returns the server's URL and
// whether any request carried them.
func gitHTTPServer(t *testing.T, root, password string) (string, func() bool) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git http-backend")
	}
	if err := exec.Command(gitBin, "http-backend", "--help").Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Skipf("needs git http-backend: %v", err)
		}
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
	}}
	var (
		mu     sync.Mutex
		authed bool
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "git" || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		authed = true
		mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return authed
	}
}

// The credentials of Options.GitSecret go to every repository cloned:
// Flux GitRepositories (also when listing tags for semver) and Argo CD
// Applications.
func TestGitSecret(t *testing.T) {
	const password = "s3cret-pa55"
	r := newGitRepo(t)
	r.commit("first", "v1.0.0")
	base, authed := gitHTTPServer(t, filepath.Dir(r.dir), password)
	url := base + "/" + filepath.Base(r.dir)

	secret := t.TempDir()
	writeFile(t, filepath.Join(secret, "username"), "git\n")
	writeFile(t, filepath.Join(secret, "password"), password+"\n")
	wrong := t.TempDir()
	writeFile(t, filepath.Join(wrong, "username"), "git")
	writeFile(t, filepath.Join(wrong, "password"), "wrong")

	flux := fluxCluster(t, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: other, namespace: flux-system}
spec: {interval: 1m, url: '`+url+`', ref: {semver: '1.x'}}
---
`+appKustomization("GitRepository", "other"))
	argo := t.TempDir()
	writeFile(t, filepath.Join(argo, "apps", "app.yaml"), `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: app, namespace: argocd}
spec:
  project: default
  source: {repoURL: '`+url+`', path: app, targetRevision: v1.0.0}
  destination: {server: https://kubernetes.default.svc, namespace: default}
`)
	tests := []struct {
		name     string
		secret   string
		insecure bool
		// problem is in the unit's Problem; empty: it renders.
		problem       string
		unpredictable bool
	}{
		{name: "credentials", secret: secret, insecure: true},
		{name: "no credentials", problem: "(no credentials were given)", unpredictable: true},
		{name: "wrong credentials", secret: wrong, insecure: true, problem: "(the credentials were refused)", unpredictable: true},
		{name: "plain http refused", secret: secret, problem: "refusing to send the credentials of " + filepath.Join(secret, "username") + " and " + filepath.Join(secret, "password")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Render: render.Options{CacheDir: t.TempDir()}, GitSecret: tc.secret,
				GitAuth: manifest.GitAuthOptions{InsecureHTTP: tc.insecure}}
			fluxUnit, fluxOK := loadApp(t, flux, opts, "first")
			opts.Root = argo
			worlds, err := Load(t.Context(), []string{filepath.Join(argo, "apps")}, opts)
			if err != nil {
				t.Fatal(err)
			}
			argoUnit := units(worlds[0])["Application argocd/app"]
			argoOK := applies(worlds[0], argoUnit.Unit, "ConfigMap/first")
			for _, got := range []struct {
				u  *Unit
				ok bool
			}{{fluxUnit, fluxOK}, {argoUnit, argoOK}} {
				if tc.problem == "" {
					if !got.ok {
						t.Errorf("%s: not rendered: %v", got.u.Unit, got.u.Problem)
					}
					continue
				}
				if got.u.Problem == nil || !strings.Contains(got.u.Problem.Error(), tc.problem) {
					t.Errorf("%s: problem %v, want one with %q", got.u.Unit, got.u.Problem, tc.problem)
					continue
				}
				if strings.Contains(got.u.Problem.Error(), password) {
					t.Errorf("%s: the problem shows the password: %v", got.u.Unit, got.u.Problem)
				}
				if _, ok := render.AsUnpredictable(got.u.Problem); ok != tc.unpredictable {
					t.Errorf("%s: problem %v: Unpredictable %v, want %v", got.u.Unit, got.u.Problem, ok, tc.unpredictable)
				}
			}
		})
	}
	if !authed() {
		t.Error("no request carried the credentials")
	}
}

func TestTakesCredentials(t *testing.T) {
	for url, want := range map[string]bool{
		"https://github.com/org/repo":    true,
		"http://git.internal/org/repo":   true,
		"ssh://git@github.com/org/repo":  true,
		"git@github.com:org/repo.git":    true,
		"file:///srv/git/repo":           false,
		"/srv/git/repo":                  false,
		"relative/dir":                   false,
		string(os.PathSeparator) + "a@b": false,
	} {
		if got := takesCredentials(url); got != want {
			t.Errorf("takesCredentials(%q) = %v, want %v", url, got, want)
		}
	}
}
