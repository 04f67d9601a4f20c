package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/truce-dev/truce/manifest"
)

// Snapshot is what a Source yielded: every object of one revision. A
// Snapshot is complete or not returned at all; prune relies on that.
type Snapshot struct {
	// Revision identifies the content, e.g. "main@sha1:<commit>".
	Revision string
	Objects  []manifest.Object
	// Namespace is where namespaced objects that name none go; empty is
	// "default". A Helm chart's objects go to the release's namespace, as
	// Helm installs them.
	Namespace string
}

// Source yields the desired objects.
type Source interface {
	Fetch(ctx context.Context) (*Snapshot, error)
	// String names the source in messages and status.
	String() string
}

// GitSource reads a Git repository (a local path or a URL; a branch, tag
// or commit; a sub-path). The path is read as Argo CD's repo-server reads
// a source whose type it detects: a directory with a Chart.yaml is a Helm
// chart rendered as helm template renders it, a directory holding .jsonnet
// files is evaluated with render/jsonnet (both as Render says, from a
// checkout of the commit), anything else is plain YAML or a kustomization
// (manifest.LoadGit). HelmRelease and Application objects are objects
// like any other: their controllers render them.
//
// It remembers the last revision it loaded: when the ref still names the
// same commit — one ls-remote for a URL, asking the refs for a local
// repository — Fetch returns those objects again instead of cloning and
// rendering anew, as Flux's source-controller skips a revision it already
// has: a chart is rendered once per revision. A commit SHA that no branch or tag leads to is not resolved; the
// objects of that commit are reused as they are. Use one GitSource, by
// pointer, for the life of a sync; a change of Git loads anew, Options
// are not compared.
type GitSource struct {
	Git     manifest.GitSource
	Options manifest.Options
	// Render renders a Helm chart or a Jsonnet directory.
	Render Render
	// Auth, when set, gives the credentials before every fetch, in place
	// of Git.Auth, so that a secret rotated on disk is used without a
	// restart.
	Auth func() (transport.AuthMethod, error)

	// load is read when nil; tests count the loads.
	load func(context.Context, manifest.GitSource) (*gitSnapshot, error)

	mu   sync.Mutex
	last *gitSnapshot // nil until a load succeeded
}

// gitSnapshot is what a GitSource loaded last, kept from its callers.
type gitSnapshot struct {
	source    string // Git.String() when loaded: the revision leaves out the path
	rev       manifest.GitRevision
	objs      []manifest.Object
	namespace string // Snapshot.Namespace
}

// Fetch implements Source. The objects are the caller's to change: those
// of a reused revision are copies.
func (s *GitSource) Fetch(ctx context.Context) (*Snapshot, error) {
	src := s.Git
	if s.Auth != nil {
		auth, err := s.Auth()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Git, err)
		}
		src.Auth = auth
	}
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last != nil && last.source == s.Git.String() {
		same, err := unchangedGit(ctx, src, last.rev)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Git, err)
		}
		if same {
			return &Snapshot{Revision: last.rev.String(), Objects: copyObjects(last.objs), Namespace: last.namespace}, nil
		}
	}
	load := s.load
	if load == nil {
		load = s.read
	}
	got, err := load(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.Git, err)
	}
	got.source = s.Git.String()
	objs := got.objs
	got.objs = copyObjects(objs)
	s.mu.Lock()
	s.last = got
	s.mu.Unlock()
	return &Snapshot{Revision: got.rev.String(), Objects: objs, Namespace: got.namespace}, nil
}

// read opens the commit src names once and reads its path: rendered
// (Render) or loaded (manifest.LoadGit).
func (s *GitSource) read(ctx context.Context, src manifest.GitSource) (*gitSnapshot, error) {
	c, err := manifest.OpenGit(ctx, src)
	if err != nil {
		return nil, err
	}
	out := &gitSnapshot{rev: c.Revision()}
	if kind := kindOf(c); kind != kindManifests {
		out.objs, out.namespace, err = s.Render.render(ctx, c, kind, s.Options)
	} else {
		out.objs, err = c.Load(ctx, s.Options)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// unchangedGit reports whether src still names the revision last.
func unchangedGit(ctx context.Context, src manifest.GitSource, last manifest.GitRevision) (bool, error) {
	rev, err := manifest.ResolveGit(ctx, src)
	switch {
	case err == nil:
		return *rev == last, nil
	case errors.Is(err, manifest.ErrGitUnadvertised):
		// Only a clone could check that the server still has the
		// commit, but what a commit holds never changes.
		return last.Ref == "" && strings.HasPrefix(last.Commit, strings.ToLower(src.Ref)), nil
	}
	return false, err
}

// copyObjects deep-copies objs.
func copyObjects(objs []manifest.Object) []manifest.Object {
	out := make([]manifest.Object, len(objs))
	for i, o := range objs {
		out[i] = manifest.Object{Source: o.Source, Object: o.Object.DeepCopy(), Raw: bytes.Clone(o.Raw)}
	}
	return out
}

func (s *GitSource) String() string { return s.Git.String() }

// PathSource reads files and directories (kustomizations rendered), for
// rehearsals of a work tree that is not committed. Its revision is a
// digest of the objects.
type PathSource struct {
	Paths   []string
	Options manifest.Options
}

// Fetch implements Source.
func (s PathSource) Fetch(ctx context.Context) (*Snapshot, error) {
	objs, err := manifest.LoadPaths(ctx, s.Paths, s.Options)
	if err != nil {
		return nil, fmt.Errorf("reading %v: %w", s.Paths, err)
	}
	return &Snapshot{Revision: "sha256:" + digestObjects(objs), Objects: objs}, nil
}

func (s PathSource) String() string { return fmt.Sprint(s.Paths) }

// StaticSource is a fixed set of objects (tests, benchmarks).
type StaticSource struct {
	Revision string
	Objects  []manifest.Object
	// Namespace is where namespaced objects that name none go; empty is
	// "default". A Helm chart's objects go to the release's namespace, as
	// Helm installs them.
	Namespace string
}

// Fetch implements Source.
func (s StaticSource) Fetch(context.Context) (*Snapshot, error) {
	return &Snapshot{Revision: s.Revision, Objects: s.Objects}, nil
}

func (s StaticSource) String() string { return "static " + s.Revision }
