package reconcile

import (
	"context"
	"fmt"

	"github.com/truce-dev/truce/manifest"
)

// Snapshot is what a Source yielded: every object of one revision. A
// Snapshot is complete or not returned at all; prune relies on that.
type Snapshot struct {
	// Revision identifies the content, e.g. "main@sha1:<commit>".
	Revision string
	Objects  []manifest.Object
}

// Source yields the desired objects.
type Source interface {
	Fetch(ctx context.Context) (*Snapshot, error)
	// String names the source in messages and status.
	String() string
}

// GitSource reads a Git repository (a local path or a URL; a branch, tag
// or commit; a sub-path), rendered as plain YAML or kustomize.
type GitSource struct {
	Git     manifest.GitSource
	Options manifest.Options
}

// Fetch implements Source.
func (s GitSource) Fetch(ctx context.Context) (*Snapshot, error) {
	objs, rev, err := manifest.LoadGit(ctx, s.Git, s.Options)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.Git, err)
	}
	return &Snapshot{Revision: rev.String(), Objects: objs}, nil
}

func (s GitSource) String() string { return s.Git.String() }

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
}

// Fetch implements Source.
func (s StaticSource) Fetch(context.Context) (*Snapshot, error) {
	return &Snapshot{Revision: s.Revision, Objects: s.Objects}, nil
}

func (s StaticSource) String() string { return "static " + s.Revision }
