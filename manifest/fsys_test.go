package manifest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks not supported: %v", err)
	}
}

func TestLoadPathsSymlinksStayInsideTheRepository(t *testing.T) {
	outside := writeTree(t, map[string]string{"secret.yaml": obj("Secret", "stolen")})
	root := writeTree(t, map[string]string{
		".git/HEAD":      "ref: refs/heads/main\n",
		"shared/cm.yaml": obj("ConfigMap", "shared"),
		"app/a.yaml":     obj("ConfigMap", "a"),
	})
	app := filepath.Join(root, "app")
	symlink(t, "../shared/cm.yaml", filepath.Join(app, "shared.yaml"))
	symlink(t, "a.yaml", filepath.Join(app, "same.yaml")) // loaded once
	symlink(t, filepath.Join(root, "shared", "cm.yaml"), filepath.Join(app, "abs.yaml"))
	symlink(t, "../../"+filepath.Base(outside)+"/secret.yaml", filepath.Join(app, "up.yaml"))
	symlink(t, filepath.Join(outside, "secret.yaml"), filepath.Join(app, "z-out.yaml"))

	objs, err := LoadPaths(context.Background(), []string{app}, Options{})
	want := []string{"app/a.yaml:1 v1/ConfigMap a", "app/shared.yaml:1 v1/ConfigMap shared"}
	if got := relSources(t, root, objs); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	checkErrors(t, err, ErrOutsideRoot,
		`app/abs.yaml: refusing to read: app/abs.yaml: symlink target "`+filepath.Join(root, "shared", "cm.yaml")+`" is absolute`,
		"app/up.yaml: refusing to read: app/up.yaml: path escapes the repository root",
		`app/z-out.yaml: refusing to read: app/z-out.yaml: symlink target "`+filepath.Join(outside, "secret.yaml")+`" is absolute`,
	)

	// Naming a file explicitly is the user's choice and is honoured.
	objs, err = LoadPaths(context.Background(), []string{filepath.Join(app, "z-out.yaml")}, Options{})
	if err != nil || len(objs) != 1 {
		t.Errorf("explicit symlink: %d objects, %v", len(objs), err)
	}
}

func TestRepositoryRoot(t *testing.T) {
	// Without a .git, the directory loaded is the root; RepositoryRoot
	// widens it so an overlay may use a base next to it.
	root := writeTree(t, map[string]string{
		"base/kustomization.yaml":          "resources: [app.yaml]\n",
		"base/app.yaml":                    baseApp,
		"overlays/prod/kustomization.yaml": prodKustomization,
		"overlays/prod/replicas.yaml":      replicasPatch,
	})
	prod := filepath.Join(root, "overlays", "prod")
	_, err := LoadPaths(context.Background(), []string{prod}, Options{})
	if !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("without RepositoryRoot: err = %v, want ErrOutsideRoot", err)
	}
	objs, err := LoadPaths(context.Background(), []string{prod}, Options{RepositoryRoot: root})
	if err != nil || len(objs) != 2 {
		t.Errorf("with RepositoryRoot: %q, %v", describe(objs), err)
	}
	_, err = LoadPaths(context.Background(), []string{root}, Options{RepositoryRoot: prod})
	checkErrors(t, err, ErrOutsideRoot, "is not inside the repository root")
}

func TestResolveIn(t *testing.T) {
	root := writeTree(t, map[string]string{"a/b/f.yaml": "x", "top.yaml": "y"})
	symlink(t, "b", filepath.Join(root, "a", "lb"))
	symlink(t, "../top.yaml", filepath.Join(root, "a", "up"))
	symlink(t, "../..", filepath.Join(root, "a", "b", "loopup"))
	symlink(t, "self", filepath.Join(root, "self"))
	symlink(t, "../..", filepath.Join(root, "a", "esc"))
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fsys := r.FS()
	tests := []struct {
		in, want string
		err      error
	}{
		{"a/lb/f.yaml", "a/b/f.yaml", nil},
		{"a/up", "top.yaml", nil},
		{"a/b/loopup/top.yaml", "top.yaml", nil},
		{"a/b/loopup/a/lb/../up", "top.yaml", nil},
		{".", ".", nil},
		{"a/../..", "", ErrOutsideRoot},
		{"a/b/loopup/..", "a/b", nil}, // name itself is cleaned lexically, as kustomize does
		{"a/esc/x", "", ErrOutsideRoot},
		{"/etc", "", ErrOutsideRoot},
		{"self", "", nil},
		{"missing", "", os.ErrNotExist},
	}
	for _, tt := range tests {
		got, err := resolveIn(fsys, tt.in)
		switch {
		case tt.err != nil && !errors.Is(err, tt.err):
			t.Errorf("resolveIn(%q) error = %v, want %v", tt.in, err, tt.err)
		case tt.err == nil && tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("resolveIn(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		case tt.want == "" && tt.err == nil && err == nil:
			t.Errorf("resolveIn(%q) = %q, want an error", tt.in, got)
		}
	}
}
