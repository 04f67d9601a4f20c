package reconcile

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
)

// fleet is a Git repository in a temporary directory, on branch main.
type fleet struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fleet{t: t, dir: dir, repo: repo}
}

// commit writes a ConfigMap named name with data mode and commits it.
func (f *fleet) commit(name, mode string) string {
	f.t.Helper()
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: shop\ndata:\n  mode: " + mode + "\n"
	if err := os.MkdirAll(filepath.Join(f.dir, "apps"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "apps", "cm.yaml"), []byte(doc), 0o644); err != nil {
		f.t.Fatal(err)
	}
	wt, err := f.repo.Worktree()
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := wt.Add("apps/cm.yaml"); err != nil {
		f.t.Fatal(err)
	}
	sig := &object.Signature{Name: "truce", Email: "truce@example.com", When: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	h, err := wt.Commit("set "+mode, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return h.String()
}

// url is a file:// URL to the repository, which go-git clones as it
// would a remote (through git-upload-pack).
func (f *fleet) url() string {
	f.t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		f.t.Skip("file:// clones need git-upload-pack")
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(f.dir)}).String()
}

// countLoads makes s count its loads.
func countLoads(s *GitSource) *int {
	n := new(int)
	s.load = func(ctx context.Context, src manifest.GitSource) (*gitSnapshot, error) {
		*n++
		return s.read(ctx, src)
	}
	return n
}

// fetch runs one Fetch and returns the revision and the ConfigMap's mode.
func fetch(t *testing.T, s *GitSource) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := s.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Objects) != 1 {
		t.Fatalf("%d objects", len(snap.Objects))
	}
	mode, _, _ := unstructured.NestedString(snap.Objects[0].Object.Object, "data", "mode")
	return snap.Revision, mode
}

func TestGitSourceReusesUnchangedRevision(t *testing.T) {
	f := newFleet(t)
	first := f.commit("settings", "blue")
	for _, tt := range []struct{ name, url string }{{"remote", f.url()}, {"local", f.dir}} {
		t.Run(tt.name, func(t *testing.T) {
			f.commit("settings", "blue")
			head, _ := f.repo.Head()
			s := &GitSource{Git: manifest.GitSource{URL: tt.url, Ref: "main", Path: "apps"}}
			loads := countLoads(s)

			rev, mode := fetch(t, s)
			if want := "main@sha1:" + head.Hash().String(); rev != want || mode != "blue" || *loads != 1 {
				t.Fatalf("first fetch: %s %s, %d loads; want %s blue, 1", rev, mode, *loads, want)
			}

			// The caller changes what it got; the next pass does not see it.
			snap, err := s.Fetch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			snap.Objects[0].Object.Object["data"] = map[string]any{"mode": "changed by the caller"}
			snap.Objects[0].Raw[0] = 'X'
			snap.Objects = nil

			rev2, mode := fetch(t, s)
			if rev2 != rev || mode != "blue" || *loads != 1 {
				t.Errorf("unchanged ref: %s %s, %d loads; want %s blue and no new load", rev2, mode, *loads, rev)
			}
			again, _ := s.Fetch(context.Background())
			if string(again.Objects[0].Raw[:1]) == "X" {
				t.Error("the cached Raw was changed through a snapshot")
			}

			next := f.commit("settings", "green")
			rev, mode = fetch(t, s)
			if want := "main@sha1:" + next; rev != want || mode != "green" || *loads != 2 {
				t.Errorf("new commit: %s %s, %d loads; want %s green, 2", rev, mode, *loads, want)
			}
			if _, _ = fetch(t, s); *loads != 2 {
				t.Errorf("%d loads after an unchanged fetch, want 2", *loads)
			}

			// Another path of the same revision is other objects.
			s.Git.Path = "apps/cm.yaml"
			if _, _ = fetch(t, s); *loads != 3 {
				t.Errorf("%d loads after the path changed, want 3", *loads)
			}
		})
	}

	// A commit no branch or tag advertises is not resolved again: what it
	// holds never changes.
	s := &GitSource{Git: manifest.GitSource{URL: f.url(), Ref: first[:10], Path: "apps"}}
	loads := countLoads(s)
	for range 2 {
		if rev, mode := fetch(t, s); rev != "sha1:"+first || mode != "blue" {
			t.Errorf("commit: %s %s", rev, mode)
		}
	}
	if *loads != 1 {
		t.Errorf("%d loads of one commit, want 1", *loads)
	}
}

func TestGitSourceErrors(t *testing.T) {
	f := newFleet(t)
	f.commit("settings", "blue")
	wt, _ := f.repo.Worktree()
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	u := f.url()
	s := &GitSource{Git: manifest.GitSource{URL: u, Ref: "feature", Path: "apps"}}
	loads := countLoads(s)
	fetch(t, s)

	// A branch that went away is an error, not the last objects again.
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	if err := f.repo.Storer.RemoveReference(plumbing.NewBranchReferenceName("feature")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Fetch(context.Background())
	if !errors.Is(err, manifest.ErrGitRef) || !strings.Contains(err.Error(), "reading "+u+"//apps?ref=feature: ") {
		t.Errorf("deleted branch: err = %v", err)
	}
	if *loads != 1 {
		t.Errorf("%d loads, want 1", *loads)
	}

	// The credentials are read before every fetch; failing to read them
	// fails the fetch.
	calls := 0
	s = &GitSource{Git: manifest.GitSource{URL: u, Ref: "main"}, Auth: func() (transport.AuthMethod, error) {
		calls++
		if calls > 1 {
			return nil, errors.New("--git-secret /etc/git: /etc/git/identity is missing or empty")
		}
		return nil, nil
	}}
	fetch(t, s)
	_, err = s.Fetch(context.Background())
	if err == nil || err.Error() != "reading "+u+"?ref=main: --git-secret /etc/git: /etc/git/identity is missing or empty" || calls != 2 {
		t.Errorf("credentials: err = %v after %d calls", err, calls)
	}
}

// Concurrent fetches share the cache safely (go test -race).
func TestGitSourceConcurrentFetch(t *testing.T) {
	f := newFleet(t)
	f.commit("settings", "blue")
	s := &GitSource{Git: manifest.GitSource{URL: f.dir, Path: "apps"}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			snap, err := s.Fetch(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			snap.Objects[0].Object.SetLabels(map[string]string{"mine": "yes"})
		})
	}
	wg.Wait()
}
