package manifest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	git "github.com/go-git/go-git/v5"
)

func TestGitCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	h := commitFiles(t, repo, dir, map[string]string{
		"charts/shop/Chart.yaml":        "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
		"charts/shop/templates/cm.yaml": obj("ConfigMap", "cm"),
		"apps/cm.yaml":                  obj("ConfigMap", "app"),
		"current":                       "@symlink charts/shop",
	}, "one")
	short := h.String()[:7]
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		src       GitSource
		path      string
		entries   []string
		readErr   error
		loadErr   bool
		loadNames []string
	}{
		{name: "a chart directory", src: GitSource{URL: dir, Path: "charts/shop"}, path: "charts/shop",
			entries: []string{"Chart.yaml", "templates"}, loadErr: true},
		{name: "a directory of the work tree selects it", src: GitSource{URL: filepath.Join(dir, "apps")}, path: "apps",
			entries: []string{"cm.yaml"}, loadNames: []string{"fleet@" + short + ":apps/cm.yaml:1 v1/ConfigMap app"}},
		{name: "a symlink inside the tree is followed", src: GitSource{URL: dir, Path: "current"}, path: "current",
			entries: []string{"Chart.yaml", "templates"}, loadErr: true},
		{name: "a file", src: GitSource{URL: dir, Path: "apps/cm.yaml"}, path: "apps/cm.yaml",
			readErr: fs.ErrInvalid, loadNames: []string{"fleet@" + short + ":apps/cm.yaml:1 v1/ConfigMap app"}},
		{name: "a missing path", src: GitSource{URL: dir, Path: "nope"}, path: "nope", readErr: fs.ErrNotExist, loadErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := OpenGit(ctx, tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if c.Revision().Commit != h.String() || c.Label() != "fleet@"+short || c.Path() != tt.path {
				t.Errorf("revision %+v, label %s, path %s", c.Revision(), c.Label(), c.Path())
			}
			entries, err := c.ReadDir()
			if !errors.Is(err, tt.readErr) || (tt.readErr != nil) != (err != nil) {
				t.Errorf("ReadDir: %v, want %v", err, tt.readErr)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, tt.entries) {
				t.Errorf("entries %v, want %v", names, tt.entries)
			}
			objs, err := c.Load(ctx, Options{})
			if (err != nil) != tt.loadErr || (!tt.loadErr && !slices.Equal(describe(objs), tt.loadNames)) {
				t.Errorf("Load: %v, %v", describe(objs), err)
			}
		})
	}

	// Checkout writes the whole tree, symlinks left out.
	c, err := OpenGit(ctx, GitSource{URL: dir, Path: "charts/shop"})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := c.Checkout(ctx, out, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "charts/shop/templates/cm.yaml")); err != nil {
		t.Error(err)
	}
	if _, err := os.Lstat(filepath.Join(out, "current")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the symlink was written: %v", err)
	}
}
