package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

const testCRD = "config/crd/bases/example.com_widgets.yaml"

// testRepo is a repository in a temporary directory whose tag v1.0.0
// (annotated or not) leads to a commit holding files; a later commit
// changes the CRD, so that reading anything but the tag shows.
type testRepo struct {
	dir, commit string
}

func newTestRepo(t *testing.T, files map[string]string, annotated bool) testRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(1700000000, 0)}
	commit := func(files map[string]string) plumbing.Hash {
		for name, content := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			// Replace, not write through, an earlier symbolic link.
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if target, ok := strings.CutPrefix(content, "symlink:"); ok {
				err = os.Symlink(target, p)
			} else {
				err = os.WriteFile(p, []byte(content), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		h, err := wt.Commit("commit", &git.CommitOptions{Author: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := commit(files)
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Tagger: sig, Message: "v1.0.0"}
	}
	if _, err := repo.CreateTag("v1.0.0", h, opts); err != nil {
		t.Fatal(err)
	}
	commit(map[string]string{testCRD: "after the tag\n"})
	// The work tree, too, differs from the tag.
	if err := os.WriteFile(filepath.Join(dir, "LICENSE"), []byte("work tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return testRepo{dir: dir, commit: h.String()}
}

const testGitURL = "https://example.com/widgets"

var (
	widgetCRD = crdHead + version("v1", true, true)
	goodFiles = map[string]string{testCRD: widgetCRD, "LICENSE": "Apache License\n", "NOTICE": "notice\n",
		"README.md": "readme\n", "config/crd/kustomization.yaml": "resources: []\n"}
)

// testGitPinOf pins testGitURL, mirrored or not, at r's tag.
func testGitPinOf(r testRepo) pin {
	return pin{Name: "Widgets", Git: testGitURL, Tag: "v1.0.0", Commit: r.commit, Dir: "widgets", Glob: "config/crd/bases/*.yaml"}
}

func TestReadGit(t *testing.T) {
	without := func(name string) map[string]string {
		out := map[string]string{}
		for k, v := range goodFiles {
			if k != name {
				out[k] = v
			}
		}
		return out
	}
	with := func(name, content string) map[string]string {
		out := without(name)
		out[name] = content
		return out
	}
	for _, tc := range []struct {
		name      string
		files     map[string]string
		annotated bool
		edit      func(*pin)
		wantErr   string
	}{
		{name: "annotated tag", files: goodFiles, annotated: true},
		{name: "lightweight tag", files: goodFiles},
		{name: "tag moved", files: goodFiles, edit: func(p *pin) { p.Commit = strings.Repeat("0", 40) }, wantErr: "leads to commit"},
		{name: "no such tag", files: goodFiles, edit: func(p *pin) { p.Tag = "v9.9.9" }, wantErr: "resolving tag v9.9.9"},
		{name: "glob matches nothing", files: goodFiles, edit: func(p *pin) { p.Glob = "crds/*.yaml" }, wantErr: "no files matching crds/*.yaml"},
		{name: "no licence", files: without("LICENSE"), wantErr: "no LICENSE file"},
		{name: "CRD is a symbolic link", files: with(testCRD, "symlink:../../../README.md"), wantErr: "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t, tc.files, tc.annotated)
			p := testGitPinOf(r)
			if tc.edit != nil {
				tc.edit(&p)
			}
			got, err := readGit(context.Background(), p, map[string]string{testGitURL: r.dir})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &moduleFiles{
				crds:     map[string][]byte{testCRD: []byte(widgetCRD)},
				licences: map[string][]byte{"LICENSE": []byte("Apache License\n"), "NOTICE": []byte("notice\n")},
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got CRDs %q, licences %q; want the tag's %s and LICENSE, NOTICE", sortedKeys(got.crds), sortedKeys(got.licences), testCRD)
			}
		})
	}
}

func TestReadGitMirrorErrors(t *testing.T) {
	r := newTestRepo(t, goodFiles, true)
	p := testGitPinOf(r)
	if _, err := readGit(context.Background(), p, map[string]string{testGitURL: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "opening the repository") {
		t.Errorf("empty directory as mirror: err = %v", err)
	}
	// Unmapped, the URL is cloned: a refused connection fails the clone.
	p.Git = "http://127.0.0.1:1/widgets.git"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := readGit(ctx, p, nil); err == nil || !strings.Contains(err.Error(), "cloning tag v1.0.0") {
		t.Errorf("unreachable URL: err = %v", err)
	}
}

// TestReadGitClones reads a tag through go-git's clone, as for a URL
// without a mirror; file:// makes go-git run git-upload-pack.
func TestReadGitClones(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git for go-git's file transport:", err)
	}
	r := newTestRepo(t, goodFiles, true)
	p := testGitPinOf(r)
	p.Git = "file://" + filepath.ToSlash(r.dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := readGit(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.crds[testCRD]) != widgetCRD || string(got.licences["LICENSE"]) != "Apache License\n" {
		t.Errorf("got CRDs %q, licences %q", sortedKeys(got.crds), sortedKeys(got.licences))
	}
}

func TestParseMirrors(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "", want: map[string]string{}},
		{in: " , ,", want: map[string]string{}},
		{in: "https://h/a=/srv/a", want: map[string]string{"https://h/a": "/srv/a"}},
		{in: " https://h/a = /srv/a , https://h/b=/srv/b,", want: map[string]string{"https://h/a": "/srv/a", "https://h/b": "/srv/b"}},
		{in: "https://h/a=/srv/x=y", want: map[string]string{"https://h/a": "/srv/x=y"}},
		{in: "https://h/a=/srv/a,https://h/a=/srv/a", want: map[string]string{"https://h/a": "/srv/a"}},
		{in: "https://h/a=/srv/a,https://h/a=/srv/b", wantErr: "mapped to both"},
		{in: "https://h/a", wantErr: "not URL=DIR"},
		{in: "=/srv/a", wantErr: "not URL=DIR"},
		{in: "https://h/a=", wantErr: "not URL=DIR"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseMirrors(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzParseMirrors(f *testing.F) {
	f.Add("https://h/a=/srv/a,https://h/b=/srv/b")
	f.Add(" = ,=,")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseMirrors(s)
		if err != nil {
			return
		}
		for url, dir := range got {
			if url == "" || dir == "" || strings.ContainsAny(url, ",=") || strings.Contains(dir, ",") {
				t.Errorf("bad mapping %q=%q from %q", url, dir, s)
			}
		}
	})
}

func TestCheckPins(t *testing.T) {
	mod := pin{Name: "M", Path: "example.com/m", Version: "v1.0.0", Dir: "m", Glob: "*.yaml"}
	tag := pin{Name: "G", Git: "https://example.com/g", Tag: "v1.0.0", Commit: strings.Repeat("a", 40), Dir: "g", Glob: "*.yaml"}
	edit := func(p pin, f func(*pin)) pin { f(&p); return p }
	for _, tc := range []struct {
		name    string
		pins    []pin
		mirrors map[string]string
		wantErr string
	}{
		{name: "module and tag", pins: []pin{mod, tag}, mirrors: map[string]string{tag.Git: "/srv/g"}},
		{name: "mirror nobody reads", pins: []pin{mod, tag}, mirrors: map[string]string{"https://example.com/typo": "/srv/g"}, wantErr: "which no pin reads"},
		{name: "name twice", pins: []pin{mod, edit(tag, func(p *pin) { p.Name = "M" })}, wantErr: "used twice"},
		{name: "dir twice", pins: []pin{mod, edit(tag, func(p *pin) { p.Dir = "m" })}, wantErr: "used twice"},
		{name: "both kinds", pins: []pin{edit(mod, func(p *pin) { p.Git = tag.Git })}, wantErr: "both a module and a Git repository"},
		{name: "neither", pins: []pin{{Name: "N", Dir: "n", Glob: "*"}}, wantErr: "neither"},
		{name: "module without version", pins: []pin{edit(mod, func(p *pin) { p.Version = "" })}, wantErr: "needs Path and Version"},
		{name: "tag without commit", pins: []pin{edit(tag, func(p *pin) { p.Commit = "" })}, wantErr: "40-digit Commit"},
		{name: "abbreviated commit", pins: []pin{edit(tag, func(p *pin) { p.Commit = "aaaaaaa" })}, wantErr: "40-digit Commit"},
		{name: "no glob", pins: []pin{edit(tag, func(p *pin) { p.Glob = "" })}, wantErr: "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPins(tc.pins, tc.mirrors)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestPins checks the real pins, and that the Git ones are recorded as
// URL@tag.
func TestPins(t *testing.T) {
	if err := checkPins(pins(), nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range pins() {
		if p.Git != "" && (p.ModulePath() != p.Git || p.ModuleVersion() != p.Tag || p.String() != p.Git+"@"+p.Tag) {
			t.Errorf("%s: recorded as %s@%s", p.Name, p.ModulePath(), p.ModuleVersion())
		}
	}
}
