package manifest

import (
	"context"
	"fmt"
	"io/fs"
	"path"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// GitCommit is the commit a GitSource resolved to, opened once: a caller
// can look at src.Path's directory before choosing how to read it (as
// truce sync detects a Helm chart) and then load or check it out without
// opening or cloning the repository again.
type GitCommit struct {
	src    GitSource
	name   string // the repository's name in Sources
	prefix string // a local path inside a work tree, relative to its top
	commit *object.Commit
	rev    GitRevision
}

// OpenGit opens (a local path) or clones into memory (a URL) src's
// repository and resolves src.Ref, as LoadGit does.
func OpenGit(ctx context.Context, src GitSource) (*GitCommit, error) {
	repo, name, prefix, err := openRepository(ctx, src)
	if err != nil {
		return nil, err
	}
	commit, rev, err := resolveRef(repo, src)
	if err != nil {
		return nil, err
	}
	return &GitCommit{src: src, name: name, prefix: prefix, commit: commit, rev: *rev}, nil
}

// Revision is the commit and the ref that named it.
func (c *GitCommit) Revision() GitRevision { return c.rev }

// Label is how Sources name the commit: "repo@<short commit>"; a file of
// the tree is shown as Label()+":"+Path()+"/file".
func (c *GitCommit) Label() string { return c.name + "@" + c.rev.ShortCommit() }

// Path is src.Path as a slash-separated path from the top of the tree
// (a local path inside a work tree adds its place in it).
func (c *GitCommit) Path() string { return path.Join(c.prefix, c.src.Path) }

// tree is the commit's tree as the loader reads it.
func (c *GitCommit) tree() (*tree, error) {
	root, err := c.commit.Tree()
	if err != nil {
		return nil, newError(Source{File: c.src.URL}, err, fmt.Sprintf("cannot read the tree of commit %s: %v", c.rev.Commit, err))
	}
	label := c.Label()
	return &tree{
		fsys: &gitFS{root: root, modTime: c.commit.Committer.When},
		// Not "/": kustomize would clamp ../ at the top to the root
		// instead of failing, so the tree sits one level down.
		vroot:   "/" + label,
		display: func(rel string) string { return label + ":" + rel },
		key:     func(rel string) string { return rel },
	}, nil
}

// ReadDir lists the directory Path names, symlinks inside the tree
// followed. A path that is a file, or missing, is an error matching
// fs.ErrInvalid or fs.ErrNotExist; Load says more about it.
func (c *GitCommit) ReadDir() ([]fs.DirEntry, error) {
	t, err := c.tree()
	if err != nil {
		return nil, err
	}
	real, err := resolveIn(t.fsys, c.Path())
	if err != nil {
		return nil, err
	}
	info, err := fs.Stat(t.fsys, real)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: c.Path(), Err: fs.ErrInvalid}
	}
	return fs.ReadDir(t.fsys, real)
}

// Load loads the objects at Path as LoadGit does.
func (c *GitCommit) Load(ctx context.Context, opts Options) ([]Object, error) {
	l := loader{decoder: newDecoder(opts), seen: make(map[string]bool)}
	if !l.proceed(ctx) {
		return l.result()
	}
	t, err := c.tree()
	if err != nil {
		return nil, err
	}
	rev := c.rev
	return l.loadGitPath(ctx, t, c.src, &rev, c.Path())
}
