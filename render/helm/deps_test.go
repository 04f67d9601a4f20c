package helm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"

	"github.com/truce-dev/truce/internal/ocitest"
	"github.com/truce-dev/truce/render"
)

// appChart writes, under root/app, a chart depending on web from repoURL.
func appChart(t *testing.T, root, repository, version string) string {
	t.Helper()
	dir := filepath.Join(root, "app")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n" +
			"  - name: web\n    version: \"" + version + "\"\n    repository: \"" + repository + "\"\n",
		"values.yaml":       "web:\n  replicaCount: 4\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\n",
	})
	return dir
}

// lockDependencies writes Chart.lock with Helm's own helm dependency
// update, then removes what it downloaded into charts/.
func lockDependencies(t *testing.T, dir string) {
	t.Helper()
	tmp := t.TempDir()
	m := &downloader.Manager{
		Out: io.Discard, ChartPath: dir, Getters: getter.Getters(),
		RepositoryConfig: filepath.Join(tmp, "repositories.yaml"), RepositoryCache: filepath.Join(tmp, "cache"),
		ContentCache: filepath.Join(tmp, "content"),
	}
	if err := m.Update(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists a directory tree, to prove Load leaves it alone.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	return out
}

func TestLoadBuildsDependencies(t *testing.T) {
	r := newChartRepo(t, "1.0.0", "1.1.0")
	reg := ocitest.NewRegistry(t)
	pushChart(t, reg, "charts/web", "1.2.0")
	ctx := context.Background()

	t.Run("resolved from Chart.yaml", func(t *testing.T) {
		root := t.TempDir()
		dir := appChart(t, root, r.URL, "^1.0.0")
		before := snapshot(t, root)
		ch, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		if deps := ch.Chart.Dependencies(); len(deps) != 1 || deps[0].Metadata.Version != "1.1.0" {
			t.Fatalf("dependencies = %v, want web 1.1.0", deps)
		}
		if after := snapshot(t, root); !slices.Equal(before, after) {
			t.Errorf("Load changed the repository:\nbefore %v\nafter  %v", before, after)
		}
		out := mustRender(t, ch, Release{Name: "a"}, nil, render.Options{})
		o := find(t, out.Objects, "Deployment", "a-web")
		if want := filepath.Join(ch.Dir, "charts/web-1.1.0.tgz/templates/deployment.yaml"); o.Source.File != want {
			t.Errorf("Source.File = %s, want %s", o.Source.File, want)
		}
		if replicas, _, _ := unstructuredInt(o.Object.Object, "spec", "replicas"); replicas != 4 {
			t.Errorf("replicas = %d, want the parent's value 4", replicas)
		}
	})

	t.Run("pinned by Chart.lock", func(t *testing.T) {
		root := t.TempDir()
		dir := appChart(t, root, r.URL, "~1.0.0")
		lockDependencies(t, dir)
		r.publish(t, "1.0.1")
		locked, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		if v := locked.Chart.Dependencies()[0].Metadata.Version; v != "1.0.0" {
			t.Errorf("with Chart.lock: web %s, want the locked 1.0.0", v)
		}
		os.Remove(filepath.Join(dir, "Chart.lock"))
		free, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		if v := free.Chart.Dependencies()[0].Metadata.Version; v != "1.0.1" {
			t.Errorf("without Chart.lock: web %s, want the newest match 1.0.1", v)
		}
	})

	t.Run("OCI dependency", func(t *testing.T) {
		dir := appChart(t, t.TempDir(), "oci://"+reg.Host()+"/charts", "1.2.0")
		p := &Puller{CacheDir: t.TempDir(), PlainHTTP: true, RegistryConfig: registryConfig(t)}
		ch, err := Load(ctx, dir, LoadOptions{Puller: p})
		if err != nil {
			t.Fatal(err)
		}
		if v := ch.Chart.Dependencies()[0].Metadata.Version; v != "1.2.0" {
			t.Errorf("web %s, want 1.2.0", v)
		}
	})

	t.Run("file dependency next to the chart", func(t *testing.T) {
		root := t.TempDir()
		copyDir(t, fixture(t, "charts/web"), filepath.Join(root, "libs", "web"))
		dir := appChart(t, filepath.Join(root, "apps"), "file://../../libs/web", "1.2.0")
		ch, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir(), Offline: true}, RepositoryRoot: root})
		if err != nil {
			t.Fatal(err)
		}
		if deps := ch.Chart.Dependencies(); len(deps) != 1 || deps[0].Name() != "web" {
			t.Errorf("dependencies = %v", deps)
		}
	})

	t.Run("repository named in Argo CD", func(t *testing.T) {
		dir := appChart(t, t.TempDir(), "@charts", "1.0.0")
		ch, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}, RepositoryAliases: map[string]string{"charts": r.URL}})
		if err != nil {
			t.Fatal(err)
		}
		if v := ch.Chart.Dependencies()[0].Metadata.Version; v != "1.0.0" {
			t.Errorf("web %s, want 1.0.0", v)
		}
	})
}

func TestLoadDependenciesCache(t *testing.T) {
	r := newChartRepo(t, "1.0.0")
	cache := t.TempDir()
	dir := appChart(t, t.TempDir(), r.URL, "1.0.0")
	ctx := context.Background()

	_, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: cache, Offline: true}})
	u, ok := render.AsUnpredictable(err)
	if !ok || !contains(u.Subject, "chart web 1.0.0", r.URL, "dependency of Helm chart app") {
		t.Fatalf("offline with an empty cache: %v, want Unpredictable naming the dependency", err)
	}
	if _, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: cache}}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	ch, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: cache, Offline: true}})
	if err != nil {
		t.Fatalf("offline with a warm cache: %v", err)
	}
	if v := ch.Chart.Dependencies()[0].Metadata.Version; v != "1.0.0" {
		t.Errorf("web %s", v)
	}
}

func TestLoadErrors(t *testing.T) {
	r := newChartRepo(t, "1.0.0")
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T) (dir string, opts LoadOptions)
		want  []string
	}{
		{"no puller", func(t *testing.T) (string, LoadOptions) {
			return appChart(t, t.TempDir(), r.URL, "1.0.0"), LoadOptions{}
		}, []string{"Helm chart app", "missing in charts/ directory: web", "helm dependency build"}},
		{"lock out of sync", func(t *testing.T) (string, LoadOptions) {
			dir := appChart(t, t.TempDir(), r.URL, "1.0.0")
			lockDependencies(t, dir)
			appChart(t, filepath.Dir(dir), r.URL, ">=1.0.0")
			return dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}}
		}, []string{"Helm chart app", "out of sync"}},
		{"version not in the repository", func(t *testing.T) (string, LoadOptions) {
			return appChart(t, t.TempDir(), r.URL, "7.0.0"), LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}}
		}, []string{"Helm chart app", "web"}},
		{"unknown repository name", func(t *testing.T) (string, LoadOptions) {
			return appChart(t, t.TempDir(), "@elsewhere", "1.0.0"), LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}}
		}, []string{"@elsewhere", "RepositoryAliases"}},
		{"file dependency outside the repository", func(t *testing.T) (string, LoadOptions) {
			root := t.TempDir()
			copyDir(t, fixture(t, "charts/web"), filepath.Join(root, "web"))
			dir := appChart(t, filepath.Join(root, "repo"), "file://../../web", "1.2.0")
			return dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}, RepositoryRoot: filepath.Join(root, "repo")}
		}, []string{"outside the repository root"}},
		{"symlink out of the repository", func(t *testing.T) (string, LoadOptions) {
			root := t.TempDir()
			dir := filepath.Join(root, "repo", "chart")
			copyDir(t, fixture(t, "charts/web"), dir)
			writeFiles(t, root, map[string]string{"secret.txt": "s3cr3t"})
			if err := os.Symlink(filepath.Join(root, "secret.txt"), filepath.Join(dir, "secret.txt")); err != nil {
				t.Fatal(err)
			}
			return dir, LoadOptions{RepositoryRoot: filepath.Join(root, "repo")}
		}, []string{"symlink", "outside the repository root"}},
		{"no Chart.yaml", func(t *testing.T) (string, LoadOptions) {
			return t.TempDir(), LoadOptions{}
		}, []string{"Chart.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, opts := tc.setup(t)
			_, err := Load(ctx, dir, opts)
			if err == nil || !contains(err.Error(), tc.want...) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if _, ok := render.AsUnpredictable(err); ok {
				t.Errorf("error is Unpredictable, want a plain error: %v", err)
			}
		})
	}
}

func TestLoadArchive(t *testing.T) {
	ch, err := LoadArchiveOrDir(fixture(t, "charts/web"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "web-1.2.0.tgz")
	if err := copyChartArchive(ch, dir); err != nil {
		t.Fatal(err)
	}
	got, err := LoadArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name() != "web" || got.Version() != "1.2.0" || got.Dir != path {
		t.Errorf("loaded %s %s from %s", got.Name(), got.Version(), got.Dir)
	}
	for _, bad := range []string{dir, filepath.Join(dir, "missing.tgz"), fixture(t, "charts/web/values.yaml")} {
		if _, err := LoadArchive(bad); err == nil || !strings.Contains(err.Error(), "Helm chart archive") {
			t.Errorf("LoadArchive(%s): %v", bad, err)
		}
	}
}

// TestLoadHonoursContext: Helm's dependency build takes no context; the
// session's connections are closed under it when ctx ends.
func TestLoadHonoursContext(t *testing.T) {
	r := newChartRepo(t, "1.0.0")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "index.yaml") {
			http.ServeFile(w, req, filepath.Join(r.dir, "index.yaml"))
			return
		}
		w.Header().Set("Content-Length", "100000")
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-req.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()
	dir := appChart(t, t.TempDir(), slow.URL, "1.0.0")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Load(ctx, dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Load returned after %v", d)
	}
}

// TestLoadUnreachableRepository: a dependency repository that cannot be
// reached leaves the chart's output unknown, not wrong.
func TestLoadUnreachableRepository(t *testing.T) {
	dir := appChart(t, t.TempDir(), closedURL(t), "1.0.0")
	_, err := Load(context.Background(), dir, LoadOptions{Puller: &Puller{CacheDir: t.TempDir()}})
	u, ok := render.AsUnpredictable(err)
	if !ok || !contains(u.Subject, "chart web 1.0.0", "dependency of Helm chart app") || !strings.HasPrefix(u.Reason, "cannot be reached") {
		t.Fatalf("error = %v, want Unpredictable naming the dependency", err)
	}
}
