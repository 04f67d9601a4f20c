package manifest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	baseApp = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
---
# the service
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports: [{port: 80}]
`
	prodKustomization = `resources:
- ../../base
namePrefix: prod-
patches:
- path: replicas.yaml
`
	replicasPatch = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
`
)

// newKustomizeFixture is a repository with a base and a prod overlay; the .git
// entry makes it the repository root.
func newKustomizeFixture(t *testing.T, extra map[string]string) string {
	t.Helper()
	files := map[string]string{
		".git/HEAD":                        "ref: refs/heads/main\n",
		"base/kustomization.yaml":          "resources: [app.yaml]\nconfigMapGenerator:\n- name: other\n  literals: [x=y]\n- name: cfg\n  literals: [a=b]\n",
		"base/app.yaml":                    baseApp,
		"overlays/prod/kustomization.yaml": prodKustomization,
		"overlays/prod/replicas.yaml":      replicasPatch,
		"overlays/prod/stray.yaml":         obj("ConfigMap", "not-referenced"),
	}
	for k, v := range extra {
		if v == "" {
			delete(files, k)
		} else {
			files[k] = v
		}
	}
	return writeTree(t, files)
}

// describeKustomized summarises rendered objects with their sources
// relative to root.
func describeKustomized(t *testing.T, root string, objs []Object) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		src := o.Source
		src.File = strings.TrimPrefix(filepath.ToSlash(src.File), filepath.ToSlash(root)+"/")
		src.Kustomization = strings.TrimPrefix(filepath.ToSlash(src.Kustomization), filepath.ToSlash(root)+"/")
		out = append(out, src.String()+" "+o.Object.GetKind()+" "+o.Object.GetName())
	}
	return out
}

func TestKustomizeOverlay(t *testing.T) {
	root := newKustomizeFixture(t, nil)
	objs, err := LoadPaths(context.Background(), []string{filepath.Join(root, "overlays", "prod")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Legacy kustomize order (the ConfigMaps sort by their original
	// names); the stray file next to the kustomization is not loaded;
	// generated ConfigMaps point at their generator entry.
	want := []string{
		"base/kustomization.yaml:5 (kustomization overlays/prod/kustomization.yaml) ConfigMap prod-cfg-4h2mbtbbt6",
		"base/kustomization.yaml:3 (kustomization overlays/prod/kustomization.yaml) ConfigMap prod-other-6gc9d749f7",
		"base/app.yaml:9 (kustomization overlays/prod/kustomization.yaml) Service prod-web",
		"base/app.yaml:1 (kustomization overlays/prod/kustomization.yaml) Deployment prod-web",
	}
	if got := describeKustomized(t, root, objs); !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	deploy := objs[3].Object
	if r, _, _ := unstructuredInt(deploy.Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas = %d, want the patched 3", r)
	}
	for _, o := range objs {
		if a := o.Object.GetAnnotations(); len(a) != 0 {
			t.Errorf("%s %s kept build annotations %v", o.Object.GetKind(), o.Object.GetName(), a)
		}
		if strings.Contains(string(o.Raw), "config.kubernetes.io") {
			t.Errorf("Raw of %s mentions kustomize annotations: %s", o.Object.GetName(), o.Raw)
		}
	}
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var v any = obj
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		v = m[f]
	}
	i, ok := v.(int64)
	return i, ok, nil
}

func TestKustomizeUserOriginAnnotationsAreKept(t *testing.T) {
	root := newKustomizeFixture(t, map[string]string{
		"overlays/prod/kustomization.yaml": prodKustomization + "buildMetadata: [originAnnotations]\n",
	})
	objs, err := LoadPaths(context.Background(), []string{filepath.Join(root, "overlays", "prod")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, ok := o.Object.GetAnnotations()["config.kubernetes.io/origin"]; !ok {
			t.Errorf("%s lost the origin annotation the user asked for", o.Object.GetName())
		}
	}
	if objs[3].Source.Line != 1 || !strings.HasSuffix(objs[3].Source.File, "base/app.yaml") {
		t.Errorf("Deployment source = %v", objs[3].Source)
	}
}

func TestKustomizeDiscovery(t *testing.T) {
	root := newKustomizeFixture(t, map[string]string{
		"plain/a.yaml": obj("A", "a"),
	})
	tests := []struct {
		name  string
		paths []string
		want  []string
	}{
		{
			name:  "walking a tree renders each kustomization and skips what lies below it",
			paths: []string{root},
			want: []string{
				"base/kustomization.yaml:5 ConfigMap cfg-4h2mbtbbt6", // the generator entry, in the kustomization itself
				"base/kustomization.yaml:3 ConfigMap other-6gc9d749f7",
				"base/app.yaml:9 (kustomization base/kustomization.yaml) Service web",
				"base/app.yaml:1 (kustomization base/kustomization.yaml) Deployment web",
				"base/kustomization.yaml:5 (kustomization overlays/prod/kustomization.yaml) ConfigMap prod-cfg-4h2mbtbbt6",
				"base/kustomization.yaml:3 (kustomization overlays/prod/kustomization.yaml) ConfigMap prod-other-6gc9d749f7",
				"base/app.yaml:9 (kustomization overlays/prod/kustomization.yaml) Service prod-web",
				"base/app.yaml:1 (kustomization overlays/prod/kustomization.yaml) Deployment prod-web",
				"plain/a.yaml:1 A a",
			},
		},
		{
			name:  "a kustomization file named explicitly",
			paths: []string{filepath.Join(root, "base", "kustomization.yaml")},
			want: []string{
				"base/kustomization.yaml:5 ConfigMap cfg-4h2mbtbbt6", // the generator entry, in the kustomization itself
				"base/kustomization.yaml:3 ConfigMap other-6gc9d749f7",
				"base/app.yaml:9 (kustomization base/kustomization.yaml) Service web",
				"base/app.yaml:1 (kustomization base/kustomization.yaml) Deployment web",
			},
		},
		{
			name:  "a kustomization reached twice is rendered once",
			paths: []string{filepath.Join(root, "base"), filepath.Join(root, "base", "kustomization.yaml")},
			want: []string{
				"base/kustomization.yaml:5 ConfigMap cfg-4h2mbtbbt6", // the generator entry, in the kustomization itself
				"base/kustomization.yaml:3 ConfigMap other-6gc9d749f7",
				"base/app.yaml:9 (kustomization base/kustomization.yaml) Service web",
				"base/app.yaml:1 (kustomization base/kustomization.yaml) Deployment web",
			},
		},
		{
			name:  "files next to a kustomization can still be named explicitly",
			paths: []string{filepath.Join(root, "overlays", "prod", "stray.yaml")},
			want:  []string{"overlays/prod/stray.yaml:1 ConfigMap not-referenced"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := LoadPaths(context.Background(), tt.paths, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := describeKustomized(t, root, objs); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestKustomizeRefusals(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		opts  Options
		kind  error
		want  string
	}{
		{
			name:  "remote base over https",
			files: map[string]string{"overlays/prod/kustomization.yaml": "namePrefix: p-\nresources:\n- https://github.com/org/repo//deploy?ref=v1\n"},
			kind:  ErrRemoteReference,
			want:  `overlays/prod/kustomization.yaml:3: resources entry "https://github.com/org/repo//deploy?ref=v1" is remote`,
		},
		{
			name:  "scheme-less GitHub base, as kustomize accepts it",
			files: map[string]string{"overlays/prod/kustomization.yaml": "resources:\n- github.com/org/repo/deploy?ref=v1\n"},
			kind:  ErrRemoteReference,
			want:  `overlays/prod/kustomization.yaml:2: resources entry "github.com/org/repo/deploy?ref=v1" is remote`,
		},
		{
			name: "remote component in a base",
			files: map[string]string{
				"base/kustomization.yaml": "resources: [app.yaml]\ncomponents:\n- git@github.com:org/components.git//monitoring\n",
			},
			kind: ErrRemoteReference,
			want: `base/kustomization.yaml:3: components entry "git@github.com:org/components.git//monitoring" is remote`,
		},
		{
			name:  "remote patch file",
			files: map[string]string{"overlays/prod/kustomization.yaml": "resources: [../../base]\npatches:\n- path: https://example.com/patch.yaml\n"},
			kind:  ErrRemoteReference,
			want:  `patches entry "https://example.com/patch.yaml" is remote`,
		},
		{
			name:  "remote generator file",
			files: map[string]string{"overlays/prod/kustomization.yaml": "configMapGenerator:\n- name: c\n  files: [conf=https://example.com/c.txt]\n"},
			kind:  ErrRemoteReference,
			want:  `configMapGenerator entry "https://example.com/c.txt" is remote`,
		},
		{
			name: "remote file in a builtin generator configuration",
			files: map[string]string{
				"overlays/prod/kustomization.yaml": "generators: [gen.yaml]\n",
				"overlays/prod/gen.yaml":           "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: c}\nfiles:\n- https://example.com/c.txt\n",
			},
			kind: ErrRemoteReference,
			want: `overlays/prod/gen.yaml:5: ConfigMapGenerator "c" refers to "https://example.com/c.txt", which is remote`,
		},
		{
			name:  "helm charts",
			files: map[string]string{"overlays/prod/kustomization.yaml": "helmCharts:\n- name: redis\n  repo: https://charts.example.com\n"},
			kind:  ErrRemoteReference,
			want:  "overlays/prod/kustomization.yaml:1: helmCharts are not supported",
		},
		{
			name: "base outside the repository root",
			files: map[string]string{
				".git/HEAD":                        "",
				"repo/.git/HEAD":                   "ref: refs/heads/main\n",
				"repo/app/kustomization.yaml":      "resources: [../../base]\n",
				"overlays/prod/kustomization.yaml": "",
			},
			kind: ErrOutsideRoot,
			want: "refusing to read",
		},
		{
			name: "resource symlinked out of the repository",
			files: map[string]string{
				"overlays/prod/kustomization.yaml":   "resources: [secret.yaml]\n",
				"@symlink overlays/prod/secret.yaml": "/etc/passwd",
			},
			kind: ErrOutsideRoot,
			want: `symlink target "/etc/passwd" is absolute`,
		},
		{
			name: "kustomize output above MaxFileBytes",
			files: map[string]string{
				// Every input fits; together they do not.
				"base/kustomization.yaml": "resources: [app.yaml, a.yaml, b.yaml, c.yaml]\n",
				"base/a.yaml":             obj("ConfigMap", "a") + "data: {k: " + strings.Repeat("a", 200) + "}\n",
				"base/b.yaml":             obj("ConfigMap", "b") + "data: {k: " + strings.Repeat("b", 200) + "}\n",
				"base/c.yaml":             obj("ConfigMap", "c") + "data: {k: " + strings.Repeat("c", 200) + "}\n",
			},
			opts: Options{MaxFileBytes: 500},
			kind: ErrTooLarge,
			want: "overlays/prod/kustomization.yaml: kustomize output is larger than the 500 bytes limit (MaxFileBytes)",
		},
		{
			name:  "input file above MaxFileBytes",
			files: map[string]string{"base/app.yaml": baseApp + "---\n" + obj("ConfigMap", strings.Repeat("x", 300))},
			opts:  Options{MaxFileBytes: 400},
			kind:  ErrTooLarge,
			want:  "base/app.yaml: file is",
		},
		{
			name:  "alias bomb in a resource",
			files: map[string]string{"base/app.yaml": billionLaughs},
			kind:  ErrAliasExpansion,
			want:  "base/app.yaml:",
		},
		{
			name: "exec KRM function",
			files: map[string]string{
				"overlays/prod/kustomization.yaml": "resources: [../../base]\ngenerators: [fn.yaml]\n",
				"overlays/prod/fn.yaml": "apiVersion: example.com/v1\nkind: Gen\nmetadata:\n  name: g\n  annotations:\n" +
					"    config.kubernetes.io/function: |\n      exec:\n        path: /bin/touch\n",
			},
			kind: ErrKustomize,
			want: "overlays/prod/kustomization.yaml: kustomize build failed: ",
		},
		{
			name:  "missing resource",
			files: map[string]string{"base/app.yaml": ""},
			kind:  ErrKustomize,
			want:  "overlays/prod/kustomization.yaml: kustomize build failed: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			var links [][2]string
			for k, v := range tt.files {
				if name, ok := strings.CutPrefix(k, "@symlink "); ok {
					links = append(links, [2]string{name, v})
					continue
				}
				files[k] = v
			}
			root := newKustomizeFixture(t, files)
			for _, l := range links {
				if err := os.Symlink(l[1], filepath.Join(root, filepath.FromSlash(l[0]))); err != nil {
					t.Skipf("symlinks not supported: %v", err)
				}
			}
			dir := filepath.Join(root, "overlays", "prod")
			if _, err := os.Stat(filepath.Join(root, "repo")); err == nil {
				dir = filepath.Join(root, "repo", "app")
			}
			objs, err := LoadPaths(context.Background(), []string{dir}, tt.opts)
			if err == nil {
				t.Fatalf("no error; got %q", describe(objs))
			}
			msg := strings.ReplaceAll(err.Error(), root+string(filepath.Separator), "")
			t.Log(msg)
			if !errors.Is(err, tt.kind) || !strings.Contains(msg, tt.want) {
				t.Errorf("error = %s\nwant %v containing %q", msg, tt.kind, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error is a %T, not an *Error", err)
			}
			if len(objs) != 0 {
				t.Errorf("got objects despite the error: %q", describe(objs))
			}
		})
	}
}

func TestKustomizeCancellation(t *testing.T) {
	root := newKustomizeFixture(t, nil)
	// One Err call for the path itself, one for base: overlays/prod is
	// not built.
	ctx := &countdownCtx{Context: context.Background(), left: 2}
	objs, err := LoadPaths(ctx, []string{root}, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	for _, o := range objs {
		if strings.Contains(o.Source.Kustomization, "overlays") {
			t.Errorf("overlay built after cancellation: %v", o.Source)
		}
	}
	if len(objs) != 4 {
		t.Errorf("got %q, want the base's 4 objects", describe(objs))
	}
}
