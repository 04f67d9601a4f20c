package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrOutsideRoot classifies an *Error about a path, symlink or kustomize
// reference that leads outside the repository root, or a symlink with an
// absolute target. Such paths are refused rather than followed: a manifest
// repository must not be able to make truce read /etc/passwd or another
// user's files and publish them as "desired state".
var ErrOutsideRoot = errors.New("path escapes the repository root")

// maxSymlinks bounds how many symlinks resolving one path may follow, like
// the kernel's ELOOP limit.
const maxSymlinks = 40

// resolveIn returns name, a slash-separated path relative to the root of
// fsys, with every symlink in it resolved, as a clean relative path ("." for
// the root). Symlinks with absolute targets and paths that climb above the
// root are refused with ErrOutsideRoot. The final element must exist. name
// itself is cleaned lexically first, as kustomize and io/fs treat paths;
// ".." in symlink targets is resolved against the link's real directory.
// File systems that cannot report symlinks are taken at their word.
func resolveIn(fsys fs.FS, name string) (string, error) {
	name = path.Clean(name)
	if name == ".." || strings.HasPrefix(name, "../") || path.IsAbs(name) {
		return "", &fs.PathError{Op: "resolve", Path: name, Err: ErrOutsideRoot}
	}
	rl, ok := fsys.(fs.ReadLinkFS)
	if !ok || name == "." {
		return name, nil
	}
	done := "."
	rest := strings.Split(name, "/")
	links := 0
	for len(rest) > 0 {
		elem := rest[0]
		rest = rest[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			// done holds no symlinks, so ".." is its lexical parent.
			if done == "." {
				return "", &fs.PathError{Op: "resolve", Path: name, Err: ErrOutsideRoot}
			}
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, elem)
		info, err := rl.Lstat(next)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: name, Err: errors.New("too many levels of symbolic links")}
		}
		target, err := rl.ReadLink(next)
		if err != nil {
			return "", err
		}
		if target == "" {
			return "", &fs.PathError{Op: "resolve", Path: next, Err: errors.New("empty symlink")}
		}
		if path.IsAbs(target) || filepath.IsAbs(target) {
			return "", &fs.PathError{Op: "resolve", Path: next,
				Err: fmt.Errorf("symlink target %q is absolute: %w", target, ErrOutsideRoot)}
		}
		rest = append(strings.Split(filepath.ToSlash(target), "/"), rest...)
	}
	return done, nil
}

// tree is a directory tree objects are loaded from: the on-disk repository
// (or directory) containing what was asked for, or the tree of a Git
// commit. Paths inside it are slash-separated and relative to its root.
type tree struct {
	fsys fs.FS
	// vroot is the absolute path under which kustomize sees fsys.
	vroot string
	// display turns a path of the tree into the Source.File users see.
	display func(rel string) string
	// key identifies a resolved path across trees, so that a file or
	// kustomization reached by several paths is loaded once.
	key func(rel string) string
	// onDisk says that display paths name the files on disk (not a Git
	// revision's tree), so that Options.Chart can read them.
	onDisk bool
}

// diskTree opens the repository that contains dir on disk. Its root is
// Options.RepositoryRoot, else the top of the Git work tree containing dir,
// else dir itself. It returns the tree, dir's resolved path inside it and a
// function that releases the tree.
func diskTree(dir string, opts Options) (*tree, string, func(), error) {
	real, err := filepath.Abs(dir)
	if err == nil {
		real, err = filepath.EvalSymlinks(real)
	}
	if err != nil {
		return nil, "", nil, err
	}
	rootDir := opts.RepositoryRoot
	if rootDir != "" {
		rootDir, err = filepath.Abs(rootDir)
		if err == nil {
			rootDir, err = filepath.EvalSymlinks(rootDir)
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("repository root: %w", err)
		}
	} else {
		rootDir = gitTopLevel(real)
	}
	rel, err := filepath.Rel(rootDir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, "", nil, fmt.Errorf("%s is not inside the repository root %s: %w", dir, rootDir, ErrOutsideRoot)
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, "", nil, err
	}
	start := filepath.ToSlash(rel)
	t := &tree{
		fsys:  root.FS(),
		vroot: rootDir,
		display: func(p string) string {
			// Relative to what the user typed, like plain files.
			r, err := filepath.Rel(filepath.FromSlash(start), filepath.FromSlash(p))
			if err != nil {
				return filepath.Join(rootDir, filepath.FromSlash(p))
			}
			return filepath.Join(dir, r)
		},
		key:    func(p string) string { return filepath.Join(rootDir, filepath.FromSlash(p)) },
		onDisk: true,
	}
	return t, start, func() { root.Close() }, nil
}

// RepositoryRoot is the root LoadPaths confines a directory to when
// Options.RepositoryRoot is empty: the top of the Git work tree that holds
// path, else path itself (made absolute, symlinks resolved).
func RepositoryRoot(path string) (string, error) {
	real, err := filepath.Abs(path)
	if err == nil {
		real, err = filepath.EvalSymlinks(real)
	}
	if err != nil {
		return "", err
	}
	if info, err := os.Stat(real); err == nil && !info.IsDir() {
		real = filepath.Dir(real)
	}
	return gitTopLevel(real), nil
}

// gitTopLevel returns the nearest directory at or above dir that holds a
// .git entry (a directory, or a file for worktrees and submodules), or dir
// when there is none.
func gitTopLevel(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}
