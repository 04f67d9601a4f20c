package reconcile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/repo/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/jsonnet"
)

// commitFiles writes files (an empty content removes the file) and
// commits them; it returns the short commit.
func (f *fleet) commitFiles(files map[string]string) string {
	f.t.Helper()
	wt, err := f.repo.Worktree()
	must(f.t, err)
	for name, content := range files {
		p := filepath.Join(f.dir, filepath.FromSlash(name))
		if content == "" {
			_, err := wt.Remove(name)
			must(f.t, err)
			continue
		}
		must(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(f.t, os.WriteFile(p, []byte(content), 0o644))
		_, err := wt.Add(name)
		must(f.t, err)
	}
	sig := &object.Signature{Name: "truce", Email: "truce@example.com", When: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	h, err := wt.Commit("change", &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	must(f.t, err)
	return h.String()[:7]
}

// shopChart is a chart with a subchart in charts/ and a production values
// file; its ConfigMap names no namespace.
var shopChart = map[string]string{
	"chart/Chart.yaml":       "apiVersion: v2\nname: shop\nversion: 0.1.0\ndependencies:\n- name: cache\n  version: 0.1.0\n",
	"chart/values.yaml":      "mode: blue\nimage:\n  tag: \"1.0\"\ncache:\n  size: 1\n",
	"chart/values-prod.yaml": "mode: green\ncache:\n  size: 3\n",
	"chart/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  mode: {{ .Values.mode | quote }}
  tag: {{ .Values.image.tag | quote }}
  namespace: {{ .Release.Namespace }}
`,
	"chart/templates/tests/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  annotations:\n    helm.sh/hook: test\nspec:\n  containers: [{name: c, image: busybox}]\n",
	"chart/charts/cache/Chart.yaml":   "apiVersion: v2\nname: cache\nversion: 0.1.0\n",
	"chart/charts/cache/values.yaml":  "size: 0\n",
	"chart/charts/cache/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: cache
  namespace: cache
data:
  size: {{ .Values.size | quote }}
`,
}

// jsonnetDir evaluates main.jsonnet with an external variable, a
// top-level argument and a library; sub/ is not read (no recurse).
var jsonnetDir = map[string]string{
	"libs/shop.libsonnet": "{ env: 'prod' }\n",
	"jsonnet/main.jsonnet": `local shop = import 'shop.libsonnet';
function(replicas) {
  apiVersion: 'v1', kind: 'ConfigMap',
  metadata: { name: std.extVar('name'), namespace: 'shop' },
  data: { env: shop.env, replicas: replicas, price: std.extVar('price') },
}
`,
	"jsonnet/extra.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: shop}\n",
	"jsonnet/sub/nested.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nested, namespace: shop}\n",
}

// summary shows each object as "name source k=v…" with its data, sorted.
func summary(objs []manifest.Object) []string {
	var out []string
	for _, o := range objs {
		line := o.Object.GetName() + " " + o.Source.File
		data, _, _ := unstructured.NestedStringMap(o.Object.Object, "data")
		var kv []string
		for k, v := range data {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		out = append(out, strings.TrimSpace(line+" "+strings.Join(kv, " ")))
	}
	slices.Sort(out)
	return out
}

func TestGitSourceRenders(t *testing.T) {
	for _, tt := range []struct {
		name      string
		files     map[string]string
		path      string
		render    Render
		want      []string // with C for the short commit
		namespace string
	}{
		{
			name: "a chart with a values file and a value set", files: shopChart, path: "chart",
			render: Render{Helm: HelmRender{ReleaseName: "shop", Namespace: "shop", ValueFiles: []string{"values-prod.yaml"},
				Set: []helm.Parameter{{Name: "image.tag", Value: "1.4.2,rc"}}}},
			want: []string{
				"cache fleet@C:chart/charts/cache/templates/cm.yaml size=3",
				"shop-settings fleet@C:chart/templates/cm.yaml mode=green namespace=shop tag=1.4.2,rc",
			},
			namespace: "shop",
		},
		{
			name: "a chart with its defaults", files: shopChart, path: "chart",
			want: []string{
				"cache fleet@C:chart/charts/cache/templates/cm.yaml size=1",
				"shop-settings fleet@C:chart/templates/cm.yaml mode=blue namespace=default tag=1.0",
			},
		},
		{
			name: "a Jsonnet directory with variables and a library", files: jsonnetDir, path: "jsonnet",
			render: Render{Jsonnet: JsonnetRender{
				ExtVars: []jsonnet.Var{{Name: "name", Value: "settings"}, {Name: "price", Value: "$5"}},
				TLAs:    []jsonnet.Var{{Name: "replicas", Value: "3"}},
				Libs:    []string{"libs"},
			}},
			want: []string{
				"extra fleet@C:jsonnet/extra.yaml",
				"settings fleet@C:jsonnet/main.jsonnet env=prod price=$5 replicas=3",
			},
		},
		{
			name: "a kustomization beside a Chart.yaml is kustomize, as in Argo CD",
			files: map[string]string{
				"app/Chart.yaml":         "apiVersion: v2\nname: app\nversion: 0.1.0\n",
				"app/kustomization.yaml": "resources: [cm.yaml]\nnamePrefix: k-\n",
				"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n",
			},
			path: "app",
			want: []string{"k-settings fleet@C:app/cm.yaml"},
		},
		{
			name:  "plain YAML is read as before",
			files: map[string]string{"apps/a/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n"},
			path:  "apps",
			want:  []string{"settings fleet@C:apps/a/cm.yaml"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t)
			short := f.commitFiles(tt.files)
			s := &GitSource{Git: manifest.GitSource{URL: f.dir, Ref: "main", Path: tt.path}, Render: tt.render}
			s.Render.Options.CacheDir = t.TempDir()
			s.Render.Options.Offline = true
			loads := countLoads(s)
			for range 2 {
				snap, err := s.Fetch(context.Background())
				must(t, err)
				want := make([]string, len(tt.want))
				for i, w := range tt.want {
					want[i] = strings.ReplaceAll(w, "@C:", "@"+short+":")
				}
				if got := summary(snap.Objects); !slices.Equal(got, want) {
					t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if snap.Namespace != tt.namespace {
					t.Errorf("namespace %q, want %q", snap.Namespace, tt.namespace)
				}
			}
			if *loads != 1 {
				t.Errorf("%d loads for an unchanged revision, want 1", *loads)
			}
		})
	}
}

// A chart that fails to render fails the pass: nothing is applied or
// pruned, and the error names the template in the commit.
func TestRenderErrorFailsThePass(t *testing.T) {
	f := newFleet(t)
	f.commitFiles(shopChart)
	c := newCluster(t, shopNamespace+"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: cache\n")
	opts := DefaultOptions()
	opts.Prune = true
	s := &GitSource{Git: manifest.GitSource{URL: f.dir, Ref: "main", Path: "chart"},
		Render: Render{Helm: HelmRender{ReleaseName: "shop", Namespace: "shop"}}}
	s.Render.Options.Offline = true
	r, err := New(c, s, &MemoryStore{}, opts)
	must(t, err)
	res := runPass(t, r)
	if got := actions(res); got["ConfigMap/shop-settings"] != Created || got["ConfigMap/cache"] != Created || len(got) != 2 {
		t.Fatalf("first pass: %v %v", got, res.Errors)
	}
	for _, o := range res.Objects {
		if !strings.HasPrefix(o.Source, "fleet@") || !strings.Contains(o.Source, "/templates/cm.yaml (helm chart fleet@") {
			t.Errorf("%s comes from %q, want its template in the commit", o.Ref, o.Source)
		}
	}
	settings := cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "shop-settings"}
	if _, err := c.Get(context.Background(), settings); err != nil {
		t.Fatalf("the chart's ConfigMap goes to the release namespace: %v", err)
	}

	for _, tt := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "a template that fails",
			files: map[string]string{"chart/templates/cm.yaml": "", "chart/templates/broken.yaml": "{{ .Values.missing.deep }}\n"},
			want:  []string{"shop/templates/broken.yaml", "nil pointer"},
		},
		{
			name:  "a template that renders no YAML",
			files: map[string]string{"chart/templates/broken.yaml": "apiVersion: v1\nkind: [\n"},
			want:  []string{"shop/templates/broken.yaml", "YAML parse error"},
		},
		{
			name:  "a missing values file",
			files: map[string]string{"chart/templates/broken.yaml": ""},
			want:  []string{"fleet@", ":chart/values-missing.yaml does not exist"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.commitFiles(tt.files)
			if tt.name == "a missing values file" {
				s.Render.Helm.ValueFiles = []string{"values-missing.yaml"}
			}
			_, err := r.Reconcile(context.Background())
			if err == nil {
				t.Fatal("the pass succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "truce-sync-") {
				t.Errorf("error names the scratch checkout: %v", err)
			}
			if _, err := c.Get(context.Background(), settings); err != nil {
				t.Fatalf("pruned after a failed render: %v", err)
			}
		})
	}
	// Once the chart renders again, what left it is pruned.
	s.Render.Helm.ValueFiles = nil
	res = runPass(t, r)
	if len(res.Pruned) != 1 || res.Pruned[0] != settings || actions(res)["ConfigMap/cache"] != Unchanged {
		t.Fatalf("after the fix: pruned %v, %v, errors %v", res.Pruned, actions(res), res.Errors)
	}
}

// chartRepository serves a chart "dep" 0.1.0 as a Helm repository on
// loopback, packaged and indexed by Helm.
func chartRepository(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: dep\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-dep\n",
	} {
		p := filepath.Join(src, filepath.FromSlash(name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	ch, err := helm.Load(context.Background(), src, helm.LoadOptions{})
	must(t, err)
	dir := t.TempDir()
	_, err = chartutil.Save(ch.Chart, dir)
	must(t, err)
	idx, err := repo.IndexDirectory(dir, "")
	must(t, err)
	must(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A dependency charts/ lacks is pulled into the cache, as helm dependency
// build does; offline, only the cache is read.
func TestGitSourcePullsChartDependencies(t *testing.T) {
	f := newFleet(t)
	short := f.commitFiles(map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: dep\n  version: 0.1.0\n  repository: " + chartRepository(t) + "\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\n",
	})
	cache := t.TempDir()
	for _, tt := range []struct {
		name    string
		cache   string
		offline bool
		want    []string
		wantErr string
	}{
		{name: "online", cache: cache, want: []string{
			"shop-app fleet@" + short + ":chart/templates/cm.yaml",
			"shop-dep fleet@" + short + ":chart/charts/dep-0.1.0.tgz/templates/cm.yaml",
		}},
		{name: "offline from the cache", cache: cache, offline: true, want: []string{
			"shop-app fleet@" + short + ":chart/templates/cm.yaml",
			"shop-dep fleet@" + short + ":chart/charts/dep-0.1.0.tgz/templates/cm.yaml",
		}},
		{name: "offline without the cache", cache: t.TempDir(), offline: true, wantErr: "needs the network"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &GitSource{Git: manifest.GitSource{URL: f.dir, Path: "chart"}, Render: Render{
				Options: render.Options{CacheDir: tt.cache, Offline: tt.offline}, Helm: HelmRender{ReleaseName: "shop"},
			}}
			snap, err := s.Fetch(context.Background())
			if tt.wantErr != "" {
				if _, ok := render.AsUnpredictable(err); !ok || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an Unpredictable %q", err, tt.wantErr)
				}
				return
			}
			must(t, err)
			if got := summary(snap.Objects); !slices.Equal(got, tt.want) {
				t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
