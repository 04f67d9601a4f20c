package manifest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckoutGit(t *testing.T) {
	r := newTestRepo(t)
	for _, tt := range []struct {
		name string
		src  GitSource
		want map[string]string // file → content ("" absent)
	}{
		{"local, default branch", GitSource{URL: r.dir}, map[string]string{"deploy/app/new.yaml": obj("ConfigMap", "new"), "base/app.yaml": baseApp}},
		{"clone, tag", GitSource{URL: fileURL(t, r.dir), Ref: "v1"}, map[string]string{"deploy/app/app.yaml": obj("ConfigMap", "app-v1") + "---\n" + obj("Secret", "app"), "deploy/app/new.yaml": ""}},
		{"clone, branch", GitSource{URL: fileURL(t, r.dir), Ref: "feature"}, map[string]string{"deploy/app/feature.yaml": obj("ConfigMap", "feature")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := CheckoutGit(context.Background(), tt.src, dir, Options{}); err != nil {
				t.Fatal(err)
			}
			for f, want := range tt.want {
				got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
				switch {
				case want == "" && err == nil:
					t.Errorf("%s is checked out, want absent", f)
				case want != "" && string(got) != want:
					t.Errorf("%s = %q (%v), want %q", f, got, err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
				t.Errorf("the checkout holds .git")
			}
		})
	}
	_, err := CheckoutGit(context.Background(), GitSource{URL: r.dir}, t.TempDir(), Options{MaxTotalBytes: 10})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("a checkout over MaxTotalBytes: %v, want ErrTooLarge", err)
	}
	_, err = CheckoutGit(context.Background(), GitSource{URL: r.dir, Ref: "nope"}, t.TempDir(), Options{})
	if !errors.Is(err, ErrGitRef) {
		t.Errorf("a missing ref: %v, want ErrGitRef", err)
	}
}
