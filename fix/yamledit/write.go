package yamledit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces the file at path with data so that readers see
// either the old or the new content, never a mix: it writes a temporary
// file in the same directory, syncs it, gives it the mode of the existing
// file (0644 for a new one) and renames it over path. A symbolic link at
// path is followed, so the link stays a link.
func WriteFileAtomic(path string, data []byte) error {
	return writeFileAtomic(path, data, 0o644, false)
}

// WriteFileAtomicMode is WriteFileAtomic with the file's mode given: a key
// is never readable by others, not even while it is written (the
// temporary file is created 0600).
func WriteFileAtomicMode(path string, data []byte, mode fs.FileMode) error {
	return writeFileAtomic(path, data, mode, true)
}

func writeFileAtomic(path string, data []byte, mode fs.FileMode, force bool) (err error) {
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if st, err := os.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return &fs.PathError{Op: "write", Path: path, Err: errors.New("not a regular file")}
		}
		if !force {
			mode = st.Mode().Perm()
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// Make the rename durable; not all systems can sync a directory.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
