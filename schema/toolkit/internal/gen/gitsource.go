package main

import (
	"context"
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// mirrorsEnv names the environment variable that points Git pins at local
// copies of their repositories; parseMirrors reads it.
const mirrorsEnv = "TRUCE_GEN_GIT_MIRRORS"

// parseMirrors reads comma-separated URL=DIR pairs, each mapping a Git
// pin's URL to a local repository (a work tree or a bare repository) that
// holds the pinned tag:
//
//	TRUCE_GEN_GIT_MIRRORS=https://github.com/fluxcd/source-watcher=/srv/git/source-watcher,...
//
// An empty string maps nothing.
func parseMirrors(s string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		// URLs hold no "=" here; a directory might.
		url, dir, ok := strings.Cut(pair, "=")
		url, dir = strings.TrimSpace(url), strings.TrimSpace(dir)
		if !ok || url == "" || dir == "" {
			return nil, fmt.Errorf("%s: %q is not URL=DIR", mirrorsEnv, pair)
		}
		if prev, dup := out[url]; dup && prev != dir {
			return nil, fmt.Errorf("%s: %s is mapped to both %s and %s", mirrorsEnv, url, prev, dir)
		}
		out[url] = dir
	}
	return out, nil
}

// readGit reads the files p selects, and the licence files, from the tree
// of the commit p.Tag leads to, which must be p.Commit. The repository is
// cloned into memory, the tag alone with depth 1, unless mirrors maps p.Git
// to a local repository, which is then read in place from its object
// store (its work tree, if any, is not looked at).
func readGit(ctx context.Context, p pin, mirrors map[string]string) (*moduleFiles, error) {
	repo, from, err := openGit(ctx, p, mirrors)
	if err != nil {
		return nil, err
	}
	tag := plumbing.NewTagReferenceName(p.Tag)
	// ResolveRevision peels annotated tags to their commit.
	h, err := repo.ResolveRevision(plumbing.Revision(tag))
	if err != nil {
		return nil, fmt.Errorf("%s: resolving tag %s in %s: %w", p, p.Tag, from, err)
	}
	if h.String() != p.Commit {
		return nil, fmt.Errorf("%s: tag %s in %s leads to commit %s, pinned is %s", p, p.Tag, from, h, p.Commit)
	}
	commit, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("%s: reading commit %s in %s: %w", p, h, from, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("%s: reading the tree of commit %s in %s: %w", p, h, from, err)
	}
	out := newModuleFiles()
	err = tree.Files().ForEach(func(f *object.File) error {
		if crd, licence := p.selects(f.Name); !crd && !licence {
			return nil
		}
		data, err := readBlob(f)
		if err != nil {
			return fmt.Errorf("%s: reading %s from %s: %w", p, f.Name, from, err)
		}
		out.add(p, f.Name, data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := out.complete(p); err != nil {
		return nil, err
	}
	return out, nil
}

// openGit opens p's mirror, or clones p.Tag of p.Git into memory. It
// returns the repository and where it came from, for errors.
func openGit(ctx context.Context, p pin, mirrors map[string]string) (*git.Repository, string, error) {
	if dir, ok := mirrors[p.Git]; ok {
		repo, err := git.PlainOpen(dir)
		if err != nil {
			return nil, "", fmt.Errorf("%s: opening the repository %s (%s): %w", p, dir, mirrorsEnv, err)
		}
		return repo, dir, nil
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, &git.CloneOptions{
		URL:           p.Git,
		ReferenceName: plumbing.NewTagReferenceName(p.Tag),
		SingleBranch:  true,
		Depth:         1,
		NoCheckout:    true,
		Tags:          git.NoTags,
	})
	if err != nil {
		return nil, "", fmt.Errorf("%s: cloning tag %s of %s (without network, point %s at a local copy): %w", p, p.Tag, p.Git, mirrorsEnv, err)
	}
	return repo, p.Git, nil
}

// readBlob reads a regular file of a Git tree; a symbolic link, whose blob
// is its target's name, is refused.
func readBlob(f *object.File) ([]byte, error) {
	if f.Mode != filemode.Regular && f.Mode != filemode.Executable && f.Mode != filemode.Deprecated {
		return nil, fmt.Errorf("not a regular file (mode %s)", f.Mode)
	}
	if f.Size > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	r, err := f.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readLimited(r)
}
