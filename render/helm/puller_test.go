package helm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/truce-dev/truce/internal/ocitest"
	"github.com/truce-dev/truce/render"
)

// chartRepo is an HTTP chart repository on loopback: index.yaml and chart
// archives made with Helm's own packaging and indexing.
type chartRepo struct {
	*httptest.Server
	dir      string
	requests atomic.Int64
}

// newChartRepo serves the web fixture chart at the given versions.
func newChartRepo(t *testing.T, versions ...string) *chartRepo {
	t.Helper()
	r := &chartRepo{dir: t.TempDir()}
	files := http.FileServer(http.Dir(r.dir))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.publish(t, versions...)
	return r
}

// publish adds versions of the web chart and rewrites the index.
func (r *chartRepo) publish(t *testing.T, versions ...string) {
	t.Helper()
	for _, v := range versions {
		ch, err := LoadArchiveOrDir(fixture(t, "charts/web"))
		if err != nil {
			t.Fatal(err)
		}
		ch.Metadata.Version = v
		if _, err := chartutil.Save(ch, r.dir); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := repo.IndexDirectory(r.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPullHTTP(t *testing.T) {
	r := newChartRepo(t, "1.0.0", "1.0.1", "1.1.0", "2.0.0-beta.1")
	tests := []struct {
		chart, version, want, wantErr string
	}{
		{"web", "1.0.0", "1.0.0", ""},
		{"web", "~1.0.0", "1.0.1", ""},
		{"web", "^1.0.0", "1.1.0", ""},
		{"web", "", "1.1.0", ""},
		{"web", ">=2.0.0-0", "2.0.0-beta.1", ""},
		{"web", "3.0.0", "", "no chart version found"},
		{"nope", "", "", "no chart name found"},
	}
	for _, tc := range tests {
		t.Run(tc.chart+"@"+tc.version, func(t *testing.T) {
			p := &Puller{CacheDir: t.TempDir()}
			ch, err := p.Pull(context.Background(), Ref{RepoURL: r.URL, Chart: tc.chart, Version: tc.version})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Name() != "web" || ch.Version() != tc.want {
				t.Errorf("pulled %s %s, want web %s", ch.Name(), ch.Version(), tc.want)
			}
			if !strings.HasPrefix(ch.Dir, p.CacheDir) || !exists(filepath.Join(ch.Dir, "Chart.yaml")) {
				t.Errorf("Dir = %s, want the unpacked chart in the cache %s", ch.Dir, p.CacheDir)
			}
			// Argo CD reads a pulled chart's values files from the chart.
			vals, err := ArgoValues{Files: []string{"values-prod.yaml"}}.Merge(context.Background(), ch.Dir, nil)
			if err != nil || vals["replicaCount"] != float64(5) {
				t.Errorf("values from the pulled chart: %v, %v", vals, err)
			}
			out := mustRender(t, ch, Release{Name: "p"}, nil, render.Options{})
			if o := find(t, out.Objects, "Deployment", "p-web"); o.Source.File != filepath.Join(ch.Dir, "templates/deployment.yaml") {
				t.Errorf("Source.File = %s", o.Source.File)
			}
		})
	}
}

func TestPullCache(t *testing.T) {
	r := newChartRepo(t, "1.0.0", "1.1.0")
	cache := t.TempDir()
	online, offline := &Puller{CacheDir: cache}, &Puller{CacheDir: cache, Offline: true}
	ctx := context.Background()
	if _, err := online.Pull(ctx, Ref{RepoURL: r.URL, Chart: "web", Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	before := r.requests.Load()
	if _, err := online.Pull(ctx, Ref{RepoURL: r.URL + "/", Chart: "web", Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if n := r.requests.Load() - before; n != 0 {
		t.Errorf("second pull of a pinned version made %d requests, want 0", n)
	}
	r.Close()
	tests := []struct {
		name    string
		p       *Puller
		ref     Ref
		want    string
		wantErr bool
	}{
		{"pinned, server gone", online, Ref{RepoURL: r.URL, Chart: "web", Version: "1.0.0"}, "1.0.0", false},
		{"pinned, offline", offline, Ref{RepoURL: r.URL, Chart: "web", Version: "1.0.0"}, "1.0.0", false},
		// The cached index knows 1.1.0, whose archive was never fetched.
		{"constraint offline resolves to an uncached version", offline, Ref{RepoURL: r.URL, Chart: "web", Version: "^1.0.0"}, "", true},
		{"pinned version the cached index lacks, offline", offline, Ref{RepoURL: r.URL, Chart: "web", Version: "1.5.0"}, "", true},
		{"constraint offline resolves to a cached version", offline, Ref{RepoURL: r.URL, Chart: "web", Version: "~1.0.0"}, "1.0.0", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := tc.p.Pull(ctx, tc.ref)
			if tc.wantErr {
				if _, ok := render.AsUnpredictable(err); !ok {
					t.Fatalf("error = %v, want Unpredictable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Version() != tc.want {
				t.Errorf("version %s, want %s", ch.Version(), tc.want)
			}
		})
	}
}

func TestPullOffline(t *testing.T) {
	r := newChartRepo(t, "1.0.0")
	for _, ref := range []Ref{
		{RepoURL: r.URL, Chart: "web", Version: "1.0.0"},
		{RepoURL: r.URL, Chart: "web"},
		{RepoURL: "oci://registry.example.com/charts", Chart: "web", Version: "1.0.0"},
		{RepoURL: "oci://registry.example.com/charts", Chart: "web", Version: "^1"},
	} {
		p := &Puller{CacheDir: t.TempDir(), Offline: true}
		_, err := p.Pull(context.Background(), ref)
		u, ok := render.AsUnpredictable(err)
		if !ok {
			t.Fatalf("%v: error = %v, want Unpredictable", ref, err)
		}
		if !contains(u.Subject, "chart web", ref.RepoURL) || u.Reason != "needs the network (--offline)" {
			t.Errorf("%v: Unpredictable = %+v", ref, u)
		}
	}
	if n := r.requests.Load(); n != 0 {
		t.Errorf("offline pulls made %d requests", n)
	}
}

func TestPullFailures(t *testing.T) {
	r := newChartRepo(t, "1.0.0")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "index.yaml") {
			http.ServeFile(w, req, filepath.Join(r.dir, "index.yaml"))
			return
		}
		w.Write([]byte("not a chart"))
	}))
	defer garbage.Close()
	tests := []struct {
		name          string
		p             Puller
		ref           Ref
		timeout       time.Duration
		want          []string
		is            error
		unpredictable bool
	}{
		{name: "context deadline", ref: Ref{RepoURL: slow.URL, Chart: "web", Version: "1.0.0"},
			timeout: 300 * time.Millisecond, is: context.DeadlineExceeded},
		{name: "download limit", p: Puller{MaxDownloadBytes: 600}, ref: Ref{RepoURL: r.URL, Chart: "web", Version: "1.0.0"},
			want: []string{"600 bytes limit (Puller.MaxDownloadBytes)"}},
		{name: "not a chart", ref: Ref{RepoURL: garbage.URL, Chart: "web", Version: "1.0.0"},
			want: []string{"chart web 1.0.0"}},
		{name: "not a repository", ref: Ref{RepoURL: r.URL + "/nothing", Chart: "web"},
			want: []string{"not a valid chart repository or cannot be reached"}},
		{name: "repository down", ref: Ref{RepoURL: closedURL(t), Chart: "web", Version: "1.0.0"},
			want: []string{"chart web 1.0.0", "cannot be reached"}, unpredictable: true},
		{name: "bad scheme", ref: Ref{RepoURL: "ftp://example.com", Chart: "web"}, want: []string{"http(s):// or oci://"}},
		{name: "bad chart name", ref: Ref{RepoURL: r.URL, Chart: "../web"}, want: []string{"invalid chart name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			tc.p.CacheDir = t.TempDir()
			start := time.Now()
			_, err := tc.p.Pull(ctx, tc.ref)
			if err == nil {
				t.Fatal("no error")
			}
			if _, ok := render.AsUnpredictable(err); ok != tc.unpredictable {
				t.Errorf("Unpredictable = %v, want %v: %v", ok, tc.unpredictable, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error = %v, want %v", err, tc.is)
			}
			if !contains(err.Error(), tc.want...) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
			if tc.timeout > 0 && time.Since(start) > 5*time.Second {
				t.Errorf("returned after %v", time.Since(start))
			}
			if entries, _ := os.ReadDir(filepath.Join(tc.p.CacheDir, "helm", "charts")); len(entries) > 0 {
				t.Errorf("a failed pull left %d charts in the cache", len(entries))
			}
		})
	}
}

func TestPullOCI(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	pushChart(t, reg, "charts/web", "1.0.0")
	pushChart(t, reg, "charts/web", "1.2.0")
	pushChart(t, reg, "charts/web", "2.0.0")
	repoURL := "oci://" + reg.Host() + "/charts"
	cache := t.TempDir()
	p := &Puller{CacheDir: cache, PlainHTTP: true, RegistryConfig: registryConfig(t)}
	ctx := context.Background()
	tests := []struct{ version, want string }{
		{"1.2.0", "1.2.0"},
		{"^1.0.0", "1.2.0"},
		{"", "2.0.0"},
	}
	for _, tc := range tests {
		ch, err := p.Pull(ctx, Ref{RepoURL: repoURL, Chart: "web", Version: tc.version})
		if err != nil {
			t.Fatalf("%q: %v", tc.version, err)
		}
		if ch.Version() != tc.want {
			t.Errorf("%q: pulled %s, want %s", tc.version, ch.Version(), tc.want)
		}
	}
	if _, err := p.Pull(ctx, Ref{RepoURL: repoURL, Chart: "web", Version: "9.0.0"}); err == nil {
		t.Error("pulling a missing tag succeeded")
	}

	reg.Close()
	offline := &Puller{CacheDir: cache, Offline: true}
	if ch, err := offline.Pull(ctx, Ref{RepoURL: repoURL, Chart: "web", Version: "1.2.0"}); err != nil || ch.Version() != "1.2.0" {
		t.Errorf("cached pull offline: %v, %v", ch, err)
	}
	if ch, err := p.Pull(ctx, Ref{RepoURL: repoURL, Chart: "web", Version: "1.2.0"}); err != nil || ch.Version() != "1.2.0" {
		t.Errorf("cached pull with the registry gone: %v, %v", ch, err)
	}
	if _, err := offline.Pull(ctx, Ref{RepoURL: repoURL, Chart: "web", Version: "1.0.0"}); err == nil {
		t.Error("uncached pull offline succeeded")
	} else if u, ok := render.AsUnpredictable(err); !ok || !contains(u.Subject, "chart web 1.0.0", repoURL) {
		t.Errorf("uncached pull offline: %v", err)
	}
}

// TestPullOCIDigest: the registry client checks what it downloads against
// the manifest's digests, and nothing unchecked lands in the cache.
func TestPullOCIDigest(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	pushChart(t, reg, "charts/web", "1.0.0")
	reg.Corrupt.Store(true)
	p := &Puller{CacheDir: t.TempDir(), PlainHTTP: true, RegistryConfig: registryConfig(t)}
	_, err := p.Pull(context.Background(), Ref{RepoURL: "oci://" + reg.Host() + "/charts", Chart: "web", Version: "1.0.0"})
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("error = %v, want a digest mismatch", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.CacheDir, "helm", "charts")); len(entries) > 0 {
		t.Errorf("a corrupt chart was cached")
	}
}

// closedURL is the URL of a server that is no longer listening.
func closedURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// OCI registries get the credentials of the registry config: right ones
// pull, wrong or missing ones make the chart Unpredictable, naming the
// registry and never the password.
func TestPullOCICredentials(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // not the user's Docker logins
	const password = "reg-pa55word"
	reg := ocitest.NewRegistry(t)
	pushChart(t, reg, "charts/web", "1.0.0")
	reg.RequireBasicAuth("truce", password)
	tests := []struct {
		name, config string
		want         string // "" pulls
	}{
		{"right credentials", reg.DockerConfig(t, "truce", password), ""},
		{"wrong password", reg.DockerConfig(t, "truce", "not-"+password), "registry " + reg.Host() + " refused access with the credentials of --registry-config"},
		{"no credentials", registryConfig(t), "registry " + reg.Host() + " refused access"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Puller{CacheDir: t.TempDir(), PlainHTTP: true, RegistryConfig: tc.config}
			for _, version := range []string{"1.0.0", "^1.0.0"} {
				ch, err := p.Pull(t.Context(), Ref{RepoURL: "oci://" + reg.Host() + "/charts", Chart: "web", Version: version})
				if tc.want == "" {
					if err != nil || ch.Version() != "1.0.0" {
						t.Fatalf("%s: pulled %v, %v", version, ch, err)
					}
					continue
				}
				if _, ok := render.AsUnpredictable(err); !ok || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: error %v, want Unpredictable with %q", version, err, tc.want)
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("%s: error %v shows the password", version, err)
				}
			}
		})
	}
}

// HTTP chart repositories get the credentials of a Helm repositories file
// (--repository-config) for their URL: right ones pull the index and the
// chart, wrong or missing ones make the chart Unpredictable, naming the
// repository and never the password.
func TestPullHTTPCredentials(t *testing.T) {
	const password = "repo-pa55word"
	r := newChartRepo(t, "1.0.0")
	files := r.Config.Handler
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != "truce" || p != password {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, req)
	})
	config := func(t *testing.T, user, pass string) string {
		f := repo.NewFile()
		f.Add(&repo.Entry{Name: "private", URL: r.URL + "/", Username: user, Password: pass})
		path := filepath.Join(t.TempDir(), "repositories.yaml")
		if err := f.WriteFile(path, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name   string
		config func(t *testing.T) string
		want   string // "" pulls
	}{
		{"right credentials", func(t *testing.T) string { return config(t, "truce", password) }, ""},
		{"wrong password", func(t *testing.T) string { return config(t, "truce", "not-"+password) }, "chart repository " + r.URL + " refused access (401 Unauthorized) with credentials: --repository-config"},
		{"no credentials", func(*testing.T) string { return "" }, "refused access (401 Unauthorized) with credentials: none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Puller{CacheDir: t.TempDir(), RepositoryConfig: tc.config(t)}
			for _, version := range []string{"^1.0.0", "1.0.0"} {
				ch, err := p.Pull(t.Context(), Ref{RepoURL: r.URL, Chart: "web", Version: version})
				if tc.want == "" {
					if err != nil || ch.Version() != "1.0.0" {
						t.Fatalf("%s: pulled %v, %v", version, ch, err)
					}
					continue
				}
				if _, ok := render.AsUnpredictable(err); !ok || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: error %v, want Unpredictable with %q", version, err, tc.want)
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("%s: error %v shows the password", version, err)
				}
			}
		})
	}
}
