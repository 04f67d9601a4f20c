package manifest

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// testRepo is a local repository built with go-git:
//
//	first  (tag v1 annotated, tag v1-light, branch release)
//	  ├── second (main, HEAD)
//	  └── third  (feature)
type testRepo struct {
	dir                  string
	first, second, third string
}

var testSig = &object.Signature{Name: "truce", Email: "truce@example.com", When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}

func commitFiles(t *testing.T, repo *git.Repository, dir string, files map[string]string, msg string) plumbing.Hash {
	t.Helper()
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "@symlink "); ok {
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Skipf("symlinks not supported: %v", err)
			}
		} else if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: testSig, Committer: testSig})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newTestRepo(t *testing.T) testRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shop")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	first := commitFiles(t, repo, dir, map[string]string{
		"deploy/app/app.yaml":              obj("ConfigMap", "app-v1") + "---\n" + obj("Secret", "app"),
		"deploy/app/notes.txt":             "not a manifest",
		"deploy/other/o.yaml":              obj("ConfigMap", "other"),
		"base/kustomization.yaml":          "resources: [app.yaml]\n",
		"base/app.yaml":                    baseApp,
		"overlays/prod/kustomization.yaml": prodKustomization,
		"overlays/prod/replicas.yaml":      replicasPatch,
	}, "first")
	if _, err := repo.CreateTag("v1", first, &git.CreateTagOptions{Tagger: testSig, Message: "v1"}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []*plumbing.Reference{
		plumbing.NewHashReference("refs/tags/v1-light", first),
		plumbing.NewHashReference(plumbing.NewBranchReferenceName("release"), first),
	} {
		if err := repo.Storer.SetReference(ref); err != nil {
			t.Fatal(err)
		}
	}
	second := commitFiles(t, repo, dir, map[string]string{
		"deploy/app/app.yaml": obj("ConfigMap", "app-v2"),
		"deploy/app/new.yaml": obj("ConfigMap", "new"),
	}, "second")

	// third is on feature, built without disturbing main's work tree
	// more than a checkout does.
	wt, _ := repo.Worktree()
	if err := wt.Checkout(&git.CheckoutOptions{Hash: first, Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	third := commitFiles(t, repo, dir, map[string]string{"deploy/app/feature.yaml": obj("ConfigMap", "feature")}, "third")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	return testRepo{dir: dir, first: first.String(), second: second.String(), third: third.String()}
}

func TestLoadGitLocal(t *testing.T) {
	r := newTestRepo(t)
	// Uncommitted changes are not part of any revision.
	if err := os.WriteFile(filepath.Join(r.dir, "deploy", "app", "dirty.yaml"), []byte(obj("ConfigMap", "dirty")), 0o644); err != nil {
		t.Fatal(err)
	}
	s1, s2, s3 := r.first[:7], r.second[:7], r.third[:7]
	tests := []struct {
		name    string
		src     GitSource
		wantRev string
		want    []string
	}{
		{
			name:    "HEAD",
			src:     GitSource{URL: r.dir, Path: "deploy/app"},
			wantRev: "main@sha1:" + r.second,
			want:    []string{"shop@" + s2 + ":deploy/app/app.yaml:1 v1/ConfigMap app-v2", "shop@" + s2 + ":deploy/app/new.yaml:1 v1/ConfigMap new"},
		},
		{
			name:    "branch",
			src:     GitSource{URL: r.dir, Ref: "feature", Path: "deploy/app"},
			wantRev: "feature@sha1:" + r.third,
			want: []string{
				"shop@" + s3 + ":deploy/app/app.yaml:1 v1/ConfigMap app-v1",
				"shop@" + s3 + ":deploy/app/app.yaml:6 v1/Secret app",
				"shop@" + s3 + ":deploy/app/feature.yaml:1 v1/ConfigMap feature",
			},
		},
		{
			name:    "full branch ref name",
			src:     GitSource{URL: r.dir, Ref: "refs/heads/release", Path: "deploy/other"},
			wantRev: "release@sha1:" + r.first,
			want:    []string{"shop@" + s1 + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
		},
		{
			name:    "annotated tag",
			src:     GitSource{URL: r.dir, Ref: "v1", Path: "deploy/other"},
			wantRev: "v1@sha1:" + r.first,
			want:    []string{"shop@" + s1 + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
		},
		{
			name:    "lightweight tag",
			src:     GitSource{URL: r.dir, Ref: "v1-light", Path: "deploy/other/o.yaml"},
			wantRev: "v1-light@sha1:" + r.first,
			want:    []string{"shop@" + s1 + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
		},
		{
			name:    "full commit SHA",
			src:     GitSource{URL: r.dir, Ref: r.third, Path: "deploy/app/feature.yaml"},
			wantRev: "sha1:" + r.third,
			want:    []string{"shop@" + s3 + ":deploy/app/feature.yaml:1 v1/ConfigMap feature"},
		},
		{
			name:    "abbreviated commit SHA",
			src:     GitSource{URL: r.dir, Ref: r.first[:10], Path: "deploy/other"},
			wantRev: "sha1:" + r.first,
			want:    []string{"shop@" + s1 + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
		},
		{
			name:    "a directory inside the work tree selects that sub-path",
			src:     GitSource{URL: filepath.Join(r.dir, "deploy"), Path: "other"},
			wantRev: "main@sha1:" + r.second,
			want:    []string{"shop@" + s2 + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
		},
		{
			name:    "kustomize overlay",
			src:     GitSource{URL: r.dir, Ref: "v1", Path: "overlays/prod"},
			wantRev: "v1@sha1:" + r.first,
			want: []string{
				"shop@" + s1 + ":base/app.yaml:9 (kustomization shop@" + s1 + ":overlays/prod/kustomization.yaml) v1/Service prod-web",
				"shop@" + s1 + ":base/app.yaml:1 (kustomization shop@" + s1 + ":overlays/prod/kustomization.yaml) apps/v1/Deployment prod-web",
			},
		},
		{
			name:    "kustomization file",
			src:     GitSource{URL: r.dir, Ref: "v1", Path: "base/kustomization.yaml"},
			wantRev: "v1@sha1:" + r.first,
			want: []string{
				"shop@" + s1 + ":base/app.yaml:9 (kustomization shop@" + s1 + ":base/kustomization.yaml) v1/Service web",
				"shop@" + s1 + ":base/app.yaml:1 (kustomization shop@" + s1 + ":base/kustomization.yaml) apps/v1/Deployment web",
			},
		},
		{
			name:    "whole repository",
			src:     GitSource{URL: r.dir, Ref: "release"},
			wantRev: "release@sha1:" + r.first,
			want: []string{
				"shop@" + s1 + ":base/app.yaml:9 (kustomization shop@" + s1 + ":base/kustomization.yaml) v1/Service web",
				"shop@" + s1 + ":base/app.yaml:1 (kustomization shop@" + s1 + ":base/kustomization.yaml) apps/v1/Deployment web",
				"shop@" + s1 + ":deploy/app/app.yaml:1 v1/ConfigMap app-v1",
				"shop@" + s1 + ":deploy/app/app.yaml:6 v1/Secret app",
				"shop@" + s1 + ":deploy/other/o.yaml:1 v1/ConfigMap other",
				"shop@" + s1 + ":base/app.yaml:9 (kustomization shop@" + s1 + ":overlays/prod/kustomization.yaml) v1/Service prod-web",
				"shop@" + s1 + ":base/app.yaml:1 (kustomization shop@" + s1 + ":overlays/prod/kustomization.yaml) apps/v1/Deployment prod-web",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, rev, err := LoadGit(context.Background(), tt.src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rev == nil || rev.String() != tt.wantRev {
				t.Errorf("revision = %v, want %s", rev, tt.wantRev)
			}
			if got := describe(objs); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}

	// The user's work tree is exactly as it was.
	repo, err := git.PlainOpen(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := repo.Head()
	if head.Name() != plumbing.NewBranchReferenceName("main") || head.Hash().String() != r.second {
		t.Errorf("HEAD moved to %v", head)
	}
	wt, _ := repo.Worktree()
	status, err := wt.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(status) != 1 || status.File("deploy/app/dirty.yaml").Worktree != git.Untracked {
		t.Errorf("work tree status changed:\n%v", status)
	}
}

func TestLoadGitErrors(t *testing.T) {
	r := newTestRepo(t)
	notRepo := t.TempDir()
	tests := []struct {
		name string
		src  GitSource
		kind error
		want string
	}{
		{"missing ref", GitSource{URL: r.dir, Ref: "v9"}, ErrGitRef, `ref "v9" not found`},
		{"missing sub-path", GitSource{URL: r.dir, Path: "deploy/nope"}, fs.ErrNotExist, `shop@` + r.second[:7] + `:deploy/nope: path "deploy/nope" does not exist in ` + r.dir + ` at main@sha1:`},
		{"sub-path leaving the repository", GitSource{URL: r.dir, Path: "../etc"}, ErrOutsideRoot, `path "../etc" leads outside the repository`},
		{"not a repository", GitSource{URL: notRepo}, fs.ErrNotExist, notRepo + ": cannot open Git repository: repository does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, _, err := LoadGit(context.Background(), tt.src, Options{})
			if err == nil {
				t.Fatalf("no error, got %q", describe(objs))
			}
			if (tt.kind != nil && !errors.Is(err, tt.kind)) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant %v containing %q", err, tt.kind, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error is a %T, not an *Error", err)
			}
		})
	}
}

func TestLoadGitSymlinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	h := commitFiles(t, repo, dir, map[string]string{
		"shared/cm.yaml":          obj("ConfigMap", "shared"),
		"app/a.yaml":              obj("ConfigMap", "a"),
		"app/shared.yaml":         "@symlink ../shared/cm.yaml",
		"app/same.yaml":           "@symlink a.yaml",
		"evil/abs.yaml":           "@symlink /etc/hostname",
		"evil/up.yaml":            "@symlink ../../../../etc/hostname",
		"kust/kustomization.yaml": "resources: [link.yaml]\n",
		"kust/link.yaml":          "@symlink ../../outside.yaml",
	}, "links")
	short := h.String()[:7]
	objs, _, err := LoadGit(context.Background(), GitSource{URL: dir, Path: "app"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"links@" + short + ":app/a.yaml:1 v1/ConfigMap a", "links@" + short + ":app/shared.yaml:1 v1/ConfigMap shared"}
	if got := describe(objs); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	_, _, err = LoadGit(context.Background(), GitSource{URL: dir, Path: "evil"}, Options{})
	checkErrors(t, err, nil,
		// go-git may store an absolute target in a form of its own;
		// it is absolute either way.
		`links@`+short+`:evil/abs.yaml: refusing to read: evil/abs.yaml: symlink target "/`,
		`links@`+short+`:evil/up.yaml: refusing to read: evil/up.yaml: path escapes the repository root`,
		"links@"+short+":evil: directory contains no manifest files")
	if errs := flatten(err); !errors.Is(errs[0], ErrOutsideRoot) || !errors.Is(errs[1], ErrOutsideRoot) {
		t.Errorf("escaping symlinks not classified as ErrOutsideRoot: %v", err)
	}

	_, _, err = LoadGit(context.Background(), GitSource{URL: dir, Path: "kust"}, Options{})
	checkErrors(t, err, ErrOutsideRoot, "links@"+short+":kust/kustomization.yaml: refusing to read /links@"+short+"/kust/link.yaml: path escapes the repository root")
}

// fileURL returns a file:// URL for a local repository, skipping the test
// when git's upload-pack, which go-git's file transport runs, is missing.
func fileURL(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("file:// clones need git-upload-pack")
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func TestLoadGitClone(t *testing.T) {
	r := newTestRepo(t)
	u := fileURL(t, r.dir)
	// An abbreviated SHA matches no advertised ref, so it takes a full
	// clone; a full SHA that a branch points at is fetched shallowly.
	tests := []struct {
		name    string
		src     GitSource
		wantRev string
		want    string
	}{
		{"default branch", GitSource{URL: u, Path: "deploy/app/new.yaml"}, "main@sha1:" + r.second, "shop@" + r.second[:7] + ":deploy/app/new.yaml:1 v1/ConfigMap new"},
		{"branch", GitSource{URL: u, Ref: "feature", Path: "deploy/app/feature.yaml"}, "feature@sha1:" + r.third, "shop@" + r.third[:7] + ":deploy/app/feature.yaml:1 v1/ConfigMap feature"},
		{"annotated tag", GitSource{URL: u, Ref: "v1", Path: "deploy/other"}, "v1@sha1:" + r.first, "shop@" + r.first[:7] + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
		{"advertised commit", GitSource{URL: u, Ref: r.third, Path: "deploy/app/feature.yaml"}, "sha1:" + r.third, "shop@" + r.third[:7] + ":deploy/app/feature.yaml:1 v1/ConfigMap feature"},
		{"abbreviated commit", GitSource{URL: u, Ref: r.first[:8], Path: "deploy/other"}, "sha1:" + r.first, "shop@" + r.first[:7] + ":deploy/other/o.yaml:1 v1/ConfigMap other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			objs, rev, err := LoadGit(ctx, tt.src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rev.String() != tt.wantRev {
				t.Errorf("revision = %s, want %s", rev, tt.wantRev)
			}
			if got := describe(objs); len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %q, want [%q]", got, tt.want)
			}
		})
	}

	_, _, err := LoadGit(context.Background(), GitSource{URL: u, Ref: "nope"}, Options{})
	checkErrors(t, err, ErrGitRef, u+`: ref "nope" not found`)

	_, _, err = LoadGit(context.Background(), GitSource{URL: fileURL(t, t.TempDir())}, Options{})
	checkErrors(t, err, nil, "cannot clone Git repository")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = LoadGit(ctx, GitSource{URL: u}, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestParseGitArg(t *testing.T) {
	tests := []struct {
		arg  string
		want GitSource
		ok   bool
	}{
		{"https://github.com/org/repo", GitSource{URL: "https://github.com/org/repo"}, true},
		{"https://github.com/org/repo//deploy/app?ref=v1.2.0", GitSource{URL: "https://github.com/org/repo", Path: "deploy/app", Ref: "v1.2.0"}, true},
		{"https://github.com/org/repo.git/deploy/app", GitSource{URL: "https://github.com/org/repo.git", Path: "deploy/app"}, true},
		{"https://github.com/org/repo?version=main&timeout=2m", GitSource{URL: "https://github.com/org/repo", Ref: "main"}, true},
		{"https://github.com/org/repo//./a/../b/?ref=feature%2Fx", GitSource{URL: "https://github.com/org/repo", Path: "b", Ref: "feature/x"}, true},
		{"ssh://git@github.com:22/org/repo.git//deploy?ref=0123abc", GitSource{URL: "ssh://git@github.com:22/org/repo.git", Path: "deploy", Ref: "0123abc"}, true},
		{"git@github.com:org/repo", GitSource{URL: "git@github.com:org/repo"}, true},
		{"git@github.com:org/repo.git//deploy?ref=main", GitSource{URL: "git@github.com:org/repo.git", Path: "deploy", Ref: "main"}, true},
		{"file:///srv/git/repo//apps?ref=main", GitSource{URL: "file:///srv/git/repo", Path: "apps", Ref: "main"}, true},
		{"file:///srv/git/repo", GitSource{URL: "file:///srv/git/repo"}, true},

		// Local paths are loaded from disk, even Git work trees.
		{".", GitSource{}, false},
		{"./deploy", GitSource{}, false},
		{"/home/me/repo", GitSource{}, false},
		{"deploy/app.yaml", GitSource{}, false},
		{"C:\\repo", GitSource{}, false},
		{"-", GitSource{}, false},
		// Unsupported or malformed.
		{"http://example.com/org/repo", GitSource{}, false},
		{"https:///org/repo", GitSource{}, false},
		{"https://github.com/org/repo//../../etc", GitSource{}, false},
		{"https://github.com/org/repo?ref=a&ref=b", GitSource{}, false},
		{"https://github.com/org/repo?branch=main", GitSource{}, false},
		{"https://github.com/org/repo?ref=a%20b", GitSource{}, false},
		{"file://relative/repo", GitSource{}, false},
		{"git@github.com:", GitSource{}, false},
		{"https://github.com/org/repo with space", GitSource{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			got, ok := ParseGitArg(tt.arg)
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseGitArg(%q) = %+v, %t; want %+v, %t", tt.arg, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestGitRevisionString(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		rev  GitRevision
		want string
	}{
		{GitRevision{Ref: "refs/heads/main", Commit: sha}, "main@sha1:" + sha},
		{GitRevision{Ref: "refs/tags/v1.2.0", Commit: sha}, "v1.2.0@sha1:" + sha},
		{GitRevision{Ref: "refs/pull/1/head", Commit: sha}, "refs/pull/1/head@sha1:" + sha},
		{GitRevision{Commit: sha}, "sha1:" + sha},
	} {
		if got := tt.rev.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.rev, got, tt.want)
		}
	}
}

func FuzzParseGitArg(f *testing.F) {
	for _, s := range []string{
		"https://github.com/org/repo//deploy/app?ref=v1.2.0",
		"git@github.com:org/repo.git//deploy?ref=main",
		"ssh://git@host:22/org/repo",
		"file:///srv/repo.git/apps?version=x&submodules=false",
		"https://h/a.git/b//c?ref=%2F",
		"./local", "", "user@host:/abs//x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		src, ok := ParseGitArg(arg)
		if !ok {
			if src != (GitSource{}) {
				t.Fatalf("not a Git argument but got %+v", src)
			}
			return
		}
		if src.URL == "" || !isRemoteURL(src.URL) {
			t.Fatalf("URL %q is not a remote address", src.URL)
		}
		if strings.HasPrefix(src.Path, "/") || src.Path == ".." || strings.HasPrefix(src.Path, "../") || strings.Contains(src.Path, "//") {
			t.Fatalf("Path %q is not a clean relative path", src.Path)
		}
		// String is ParseGitArg's inverse.
		again, ok := ParseGitArg(src.String())
		if !ok || again != src {
			t.Fatalf("ParseGitArg(%q) = %+v; its String %q parses as %+v, %t", arg, src, src.String(), again, ok)
		}
	})
}

// ResolveGit names the revision LoadGit then loads, locally and remotely,
// without loading.
func TestResolveGit(t *testing.T) {
	r := newTestRepo(t)
	u := fileURL(t, r.dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ref := range []string{"", "feature", "v1", "v1-light", "refs/heads/release", r.third, strings.ToUpper(r.first), r.first[:8]} {
		for _, url := range []string{r.dir, u} {
			src := GitSource{URL: url, Ref: ref, Path: "deploy"}
			t.Run(url+"?ref="+ref, func(t *testing.T) {
				got, err := ResolveGit(ctx, src)
				if url == u && ref == r.first[:8] {
					// Not advertised: only a clone can tell.
					checkErrors(t, err, ErrGitUnadvertised, u+`: ref "`+ref+`" is no branch or tag`)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				_, want, err := LoadGit(ctx, src, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if *got != *want {
					t.Errorf("ResolveGit = %+v, LoadGit's revision %+v", got, want)
				}
			})
		}
	}

	_, err := ResolveGit(ctx, GitSource{URL: u, Ref: "nope"})
	checkErrors(t, err, ErrGitRef, u+`: ref "nope" not found`)
	_, err = ResolveGit(ctx, GitSource{URL: r.dir, Ref: "nope"})
	checkErrors(t, err, ErrGitRef, r.dir+`: ref "nope" not found`)
	_, err = ResolveGit(ctx, GitSource{URL: fileURL(t, t.TempDir()), Ref: "main"})
	checkErrors(t, err, nil, "cannot list the refs of Git repository")
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := ResolveGit(cancelled, GitSource{URL: u}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}
