package manifest

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// gitFS is the tree of one Git commit as an fs.FS. Nothing is checked out:
// directories and blobs are read from the object store on demand, so a
// user's working tree is never touched and a large repository costs only
// what is loaded. Symlinks are reported by Lstat and ReadLink and followed,
// inside the tree only, by everything else.
type gitFS struct {
	root *object.Tree
	// modTime is the commit time, reported for every entry.
	modTime time.Time
}

var (
	_ fs.ReadDirFS  = (*gitFS)(nil)
	_ fs.StatFS     = (*gitFS)(nil)
	_ fs.ReadLinkFS = (*gitFS)(nil)
)

var errSubmodule = errors.New("is a Git submodule; submodules are not loaded")

// entry looks up name without following symlinks.
func (g *gitFS) entry(op, name string) (*object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: g.root.Hash}, nil
	}
	e, err := g.root.FindEntry(name)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

func (g *gitFS) info(name string, e *object.TreeEntry) (fs.FileInfo, error) {
	fi := &gitInfo{name: path.Base(name), mode: fileMode(e.Mode), mtime: g.modTime}
	if e.Mode.IsFile() {
		size, err := g.root.Size(name)
		if err != nil {
			return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
		}
		fi.size = size
	}
	return fi, nil
}

func fileMode(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Dir:
		return fs.ModeDir | 0o555
	case filemode.Executable:
		return 0o555
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	case filemode.Submodule:
		return fs.ModeIrregular
	default:
		return 0o444
	}
}

func (g *gitFS) Lstat(name string) (fs.FileInfo, error) {
	e, err := g.entry("lstat", name)
	if err != nil {
		return nil, err
	}
	return g.info(name, e)
}

func (g *gitFS) ReadLink(name string) (string, error) {
	e, err := g.entry("readlink", name)
	if err != nil {
		return "", err
	}
	if e.Mode != filemode.Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	data, err := g.readBlob(name, e, 4096)
	return string(data), err
}

func (g *gitFS) Stat(name string) (fs.FileInfo, error) {
	r, err := resolveIn(g, name)
	if err != nil {
		return nil, err
	}
	e, err := g.entry("stat", r)
	if err != nil {
		return nil, err
	}
	fi, err := g.info(r, e)
	if err != nil {
		return nil, err
	}
	fi.(*gitInfo).name = path.Base(name)
	return fi, nil
}

func (g *gitFS) ReadDir(name string) ([]fs.DirEntry, error) {
	r, err := resolveIn(g, name)
	if err != nil {
		return nil, err
	}
	e, err := g.entry("readdir", r)
	if err != nil {
		return nil, err
	}
	if e.Mode != filemode.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	t := g.root
	if r != "." {
		if t, err = g.root.Tree(r); err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
		}
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for _, c := range t.Entries {
		if !fs.ValidPath(c.Name) || c.Name == "." || path.Base(c.Name) != c.Name {
			continue // a crafted tree; never hand such a name on
		}
		out = append(out, &gitDirEntry{g: g, path: path.Join(r, c.Name), e: c})
	}
	// Git orders a directory "a" as "a/", after "a.yaml"; fs.ReadDir
	// promises plain name order.
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (g *gitFS) Open(name string) (fs.File, error) {
	r, err := resolveIn(g, name)
	if err != nil {
		return nil, err
	}
	e, err := g.entry("open", r)
	if err != nil {
		return nil, err
	}
	info, err := g.info(r, e)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Mode == filemode.Dir:
		return &gitDir{g: g, name: r, info: info}, nil
	case e.Mode == filemode.Submodule:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errSubmodule}
	}
	f, err := g.root.TreeEntryFile(&object.TreeEntry{Name: path.Base(r), Mode: e.Mode, Hash: e.Hash})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	rc, err := f.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &gitFile{ReadCloser: rc, info: info}, nil
}

// readBlob reads at most limit bytes of the blob of e.
func (g *gitFS) readBlob(name string, e *object.TreeEntry, limit int64) ([]byte, error) {
	f, err := g.root.TreeEntryFile(&object.TreeEntry{Name: path.Base(name), Mode: e.Mode, Hash: e.Hash})
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	rc, err := f.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, limit))
}

type gitInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (i *gitInfo) Name() string       { return i.name }
func (i *gitInfo) Size() int64        { return i.size }
func (i *gitInfo) Mode() fs.FileMode  { return i.mode }
func (i *gitInfo) ModTime() time.Time { return i.mtime }
func (i *gitInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *gitInfo) Sys() any           { return nil }

// gitDirEntry computes its FileInfo lazily: sizing a blob means reading
// its header, which a directory walk rarely needs.
type gitDirEntry struct {
	g    *gitFS
	path string
	e    object.TreeEntry
}

func (d *gitDirEntry) Name() string               { return d.e.Name }
func (d *gitDirEntry) IsDir() bool                { return d.e.Mode == filemode.Dir }
func (d *gitDirEntry) Type() fs.FileMode          { return fileMode(d.e.Mode).Type() }
func (d *gitDirEntry) Info() (fs.FileInfo, error) { return d.g.info(d.path, &d.e) }

type gitFile struct {
	io.ReadCloser
	info fs.FileInfo
}

func (f *gitFile) Stat() (fs.FileInfo, error) { return f.info, nil }

type gitDir struct {
	g    *gitFS
	name string
	info fs.FileInfo
	// entries is what ReadDir(n > 0) has not returned yet.
	entries []fs.DirEntry
	read    bool
}

func (d *gitDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *gitDir) Close() error               { return nil }
func (d *gitDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *gitDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		entries, err := d.g.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.entries, d.read = entries, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n:n]
	d.entries = d.entries[n:]
	return out, nil
}
