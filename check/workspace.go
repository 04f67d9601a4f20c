package check

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Workspace holds the copies of repositories that fixes are verified in:
// one copy per repository root, made when a fix is first verified and
// reused by the next (each fix's files are written over the copy and put
// back afterwards), so that a repository is copied once per run, not once
// per candidate fix. Close removes the copies.
type Workspace struct {
	mu     sync.Mutex
	copies map[string]string
}

// NewWorkspace returns an empty workspace; the caller closes it.
func NewWorkspace() *Workspace { return &Workspace{copies: map[string]string{}} }

// Close removes the copies.
func (w *Workspace) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for root, dir := range w.copies {
		errs = append(errs, os.RemoveAll(dir))
		delete(w.copies, root)
	}
	return errors.Join(errs...)
}

// with runs fn on the copy of root with files (paths under root) written
// over it, and puts the copy back as it was afterwards. Verifications
// share the copy, so they take turns.
func (w *Workspace) with(root string, files map[string][]byte, fn func(dir string, moved func(string) (string, error)) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir, ok := w.copies[root]
	if !ok {
		tmp, err := os.MkdirTemp("", "truce-verify-")
		if err != nil {
			return err
		}
		if err := copyTree(root, tmp); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("copying %s to verify fixes: %w", root, err)
		}
		w.copies[root], dir = tmp, tmp
	}
	moved := func(p string) (string, error) {
		rel, err := filepath.Rel(root, abs(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("%s is outside the repository %s", p, root)
		}
		return filepath.Join(dir, rel), nil
	}
	var undo []func() error
	restore := func() {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		if errors.Join(errs...) != nil {
			// The copy no longer mirrors the repository: make it again
			// next time.
			os.RemoveAll(dir)
			delete(w.copies, root)
		}
	}
	defer restore()
	for p, data := range files {
		dst, err := moved(p)
		if err != nil {
			return err
		}
		u, err := overwrite(dst, data)
		undo = append(undo, u)
		if err != nil {
			return err
		}
	}
	return fn(dir, moved)
}

// overwrite writes data to path and returns how to put back what was
// there: the old content, or no file (and no directories made for it).
func overwrite(path string, data []byte) (func() error, error) {
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		return func() error { return os.WriteFile(path, old, 0o644) }, os.WriteFile(path, data, 0o644)
	case !errors.Is(err, fs.ErrNotExist):
		return func() error { return nil }, err
	}
	// The first directory that does not exist yet goes with the file.
	made := path
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = d
	}
	undo := func() error { return os.RemoveAll(made) }
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return undo, err
	}
	return undo, os.WriteFile(path, data, 0o644)
}
