package world

import (
	"context"
	"fmt"
	neturl "net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/truce-dev/truce/render"
)

// gitRepo is a repository whose commits each hold one ConfigMap,
// app/cm.yaml, named after the commit.
type gitRepo struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &gitRepo{t: t, dir: dir, repo: repo}
}

// commit commits a ConfigMap named name and tags the commit with tags.
func (r *gitRepo) commit(name string, tags ...string) plumbing.Hash {
	r.t.Helper()
	writeFile(r.t, filepath.Join(r.dir, "app", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: default}\n")
	wt, _ := r.repo.Worktree()
	if _, err := wt.Add("app/cm.yaml"); err != nil {
		r.t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(0, 0)}
	h, err := wt.Commit(name, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, tag := range tags {
		if _, err := r.repo.CreateTag(tag, h, nil); err != nil {
			r.t.Fatal(err)
		}
	}
	return h
}

func (r *gitRepo) branch(name string, h plumbing.Hash) {
	r.t.Helper()
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), h)); err != nil {
		r.t.Fatal(err)
	}
}

func fileURL(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("file:// clones need git-upload-pack")
	}
	return (&neturl.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// fluxCluster writes a Flux cluster directory whose flux-system
// Kustomization applies more, and returns the repository root.
func fluxCluster(t *testing.T, more string) string {
	t.Helper()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "clusters", "prod", "flux-system", "gotk-sync.yaml"), `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: flux-system, namespace: flux-system}
spec: {interval: 1m, url: ssh://git@example.com/fleet, ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: flux-system, namespace: flux-system}
spec:
  interval: 10m
  path: ./clusters/prod
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`)
	writeFile(t, filepath.Join(root, "clusters", "prod", "more.yaml"), more)
	return root
}

// appKustomization is a Kustomization of ./app from the source kind/name.
func appKustomization(kind, name string) string {
	return fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: app, namespace: flux-system}
spec:
  interval: 10m
  path: ./app
  prune: true
  sourceRef: {kind: %s, name: %s}
`, kind, name)
}

// loadApp loads the cluster and returns the Kustomization flux-system/app
// and whether it applies ConfigMap/want.
func loadApp(t *testing.T, root string, opts Options, want string) (*Unit, bool) {
	t.Helper()
	opts.Root = root
	worlds, err := Load(context.Background(), []string{filepath.Join(root, "clusters", "prod")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	u := units(worlds[0])["Kustomization flux-system/app"]
	if u == nil {
		t.Fatalf("no Kustomization flux-system/app among %v", keys(units(worlds[0])))
	}
	for _, o := range worlds[0].Objects {
		if o.Source.Unit == u.Unit && !strings.Contains(o.Source.File, "@") {
			t.Errorf("position %s does not name the clone by URL@commit", o.Source)
		}
	}
	return u, applies(worlds[0], u.Unit, "ConfigMap/"+want)
}

func TestGitRepositoryRef(t *testing.T) {
	r := newGitRepo(t)
	first := r.commit("first", "v1.0.0", "v2.0.0-rc.1")
	r.commit("second", "v1.2.0", "1.3")
	third := r.commit("third", "v2.0.0")
	r.branch("stable", first)
	// main moves on past every tag.
	r.commit("fourth")
	url := fileURL(t, r.dir)
	tests := []struct {
		name string
		ref  string
		// want is the ConfigMap applied; empty: the unit has a Problem
		// holding problem.
		want, problem string
		// master adds a branch master at main.
		master bool
	}{
		{name: "no ref: master as Flux defaults it", ref: "{}", problem: `"refs/heads/master" not found`},
		{name: "no ref on a repository with master", ref: "{}", master: true, want: "fourth"},
		{name: "branch", ref: "{branch: stable}", want: "first"},
		{name: "tag", ref: "{tag: v1.2.0}", want: "second"},
		{name: "semver: the highest match", ref: "{semver: '>=1.0.0 <2.0.0'}", want: "second"},
		{name: "semver: prereleases need a prerelease range", ref: "{semver: '>=2.0.0-0'}", want: "third"},
		{name: "semver wins over branch", ref: "{semver: '~1.0', branch: stable}", want: "first"},
		{name: "tag wins over semver and branch", ref: "{tag: v2.0.0, semver: '~1.0', branch: stable}", want: "third"},
		{name: "name", ref: "{name: refs/tags/v1.0.0}", want: "first"},
		{name: "commit wins over everything", ref: "{commit: " + third.String() + ", tag: v1.0.0, name: refs/heads/stable}", want: "third"},
		{name: "a missing tag", ref: "{tag: v9.9.9}", problem: "GitRepository flux-system/other: failed to checkout and determine revision:"},
		{name: "a missing branch", ref: "{branch: nope}", problem: `"refs/heads/nope" not found`},
		{name: "no tag matches", ref: "{semver: '>=3.0.0'}", problem: "GitRepository flux-system/other: no match found for semver: >=3.0.0"},
		{name: "a bad range", ref: "{semver: 'not a range'}", problem: "GitRepository flux-system/other: semver parse error:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.master {
				head, err := r.repo.Head()
				if err != nil {
					t.Fatal(err)
				}
				r.branch("master", head.Hash())
				defer r.repo.Storer.RemoveReference(plumbing.NewBranchReferenceName("master"))
			}
			root := fluxCluster(t, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: other, namespace: flux-system}
spec: {interval: 1m, url: '`+url+`', ref: `+tc.ref+`}
---
`+appKustomization("GitRepository", "other"))
			opts := offline(t, root)
			opts.Render.Offline = false
			u, ok := loadApp(t, root, opts, tc.want)
			if tc.want != "" {
				if !ok {
					t.Fatalf("ConfigMap/%s not applied; problem: %v", tc.want, u.Problem)
				}
				return
			}
			if u.Problem == nil || !strings.Contains(u.Problem.Error(), tc.problem) {
				t.Fatalf("problem = %v, want one with %q", u.Problem, tc.problem)
			}
			if _, ok := render.AsUnpredictable(u.Problem); ok {
				t.Errorf("problem %v is Unpredictable: Flux would report it", u.Problem)
			}
		})
	}
	t.Run("offline", func(t *testing.T) {
		for _, ref := range []string{"{semver: '1.x'}", "{tag: v1.0.0}"} {
			root := fluxCluster(t, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: other, namespace: flux-system}
spec: {interval: 1m, url: '`+url+`', ref: `+ref+`}
---
`+appKustomization("GitRepository", "other"))
			u, _ := loadApp(t, root, offline(t, root), "")
			if _, ok := render.AsUnpredictable(u.Problem); !ok {
				t.Errorf("ref %s offline: problem %v, want Unpredictable", ref, u.Problem)
			}
		}
	})
}

func TestHighestTag(t *testing.T) {
	tags := []string{"v1.0.0", "1.1.0", "v1.2", "v1.10.0", "v2.0.0-rc.1", "latest", "v1.10.0+build.2", "v1.10.0+build.1"}
	tests := []struct{ constraint, want string }{
		{"1.x", "v1.10.0+build.2"},
		{"<1.5", "1.1.0"},
		{">=2.0.0-0", "v2.0.0-rc.1"},
		{">=3", ""},
	}
	for _, tc := range tests {
		c, err := semver.NewConstraint(tc.constraint)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := highestTag(tags, c)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q %v, want %q", tc.constraint, got, ok, tc.want)
		}
	}
}
