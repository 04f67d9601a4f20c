package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// kustomizationNames are the file names kustomize recognises, in the order
// it looks for them.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

func isKustomizationName(name string) bool {
	for _, n := range kustomizationNames {
		if name == n {
			return true
		}
	}
	return false
}

// findKustomization returns the path of the kustomization file in dir, if
// there is one. When there are several, the first is returned and
// kustomize reports the ambiguity.
func findKustomization(fsys fs.FS, dir string) (string, bool) {
	for _, n := range kustomizationNames {
		p := path.Join(dir, n)
		if r, err := resolveIn(fsys, p); err == nil {
			if info, err := fs.Stat(fsys, r); err == nil && info.Mode().IsRegular() {
				return p, true
			}
		} else if errors.Is(err, ErrOutsideRoot) {
			// Let the build report the escaping symlink.
			return p, true
		}
	}
	return "", false
}

// walkTree loads the directory start of t. A directory with a
// kustomization is rendered through it, and only through it: files next to
// it that it does not reference are not loaded, as with kustomize-controller
// and Argo CD. Other directories are walked in lexical order for *.yaml,
// *.yml and *.json files, rendering any subdirectory that holds a
// kustomization instead of descending into it.
//
// The caller has already charged start against the context; every further
// file or kustomization is charged once, before it is loaded.
func (l *loader) walkTree(ctx context.Context, t *tree, start string) {
	if kf, ok := findKustomization(t.fsys, start); ok {
		l.renderKustomization(t, start, kf)
		return
	}
	found := 0
	err := fs.WalkDir(t.fsys, start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			l.fail(treeError(t.display(p), err))
			return nil // WalkDir skips the unreadable directory itself.
		}
		if p != start && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			if p == start {
				return nil
			}
			kf, ok := findKustomization(t.fsys, p)
			if !ok {
				if !l.isChart(t, p) {
					return nil
				}
				found++
				if !l.proceed(ctx) {
					return fs.SkipAll
				}
				l.renderChart(ctx, t, p)
				return fs.SkipDir
			}
			found++
			if !l.proceed(ctx) {
				return fs.SkipAll
			}
			l.renderKustomization(t, p, kf)
			return fs.SkipDir
		}
		if !hasManifestExt(e.Name()) {
			return nil
		}
		real := p
		if e.Type()&fs.ModeSymlink != 0 {
			r, err := resolveIn(t.fsys, p)
			if err != nil {
				l.fail(treeError(t.display(p), err))
				return nil
			}
			real = r
		}
		info, err := fs.Stat(t.fsys, real)
		if err != nil {
			l.fail(treeError(t.display(p), err))
			return nil
		}
		if !info.Mode().IsRegular() {
			// Symlinked directories are not followed (neither does
			// kubectl), and reading a FIFO or device could block.
			return nil
		}
		found++
		if !l.proceed(ctx) {
			return fs.SkipAll
		}
		l.loadTreeFile(t, t.display(p), real, info)
		return nil
	})
	if err != nil {
		l.fail(treeError(t.display(start), err))
	}
	if found == 0 && !l.stopped && !l.cancelled {
		l.fail(newError(Source{File: t.display(start)}, fs.ErrNotExist,
			"directory contains no manifest files (*.yaml, *.yml, *.json) and no kustomization"))
	}
}

// isChart reports whether dir of t is a Helm chart that Options.Chart
// renders: a directory on disk holding a regular file named Chart.yaml.
func (l *loader) isChart(t *tree, dir string) bool {
	if l.opts.Chart == nil || !t.onDisk {
		return false
	}
	info, err := fs.Stat(t.fsys, path.Join(dir, "Chart.yaml"))
	return err == nil && info.Mode().IsRegular()
}

// renderChart adds the objects Options.Chart renders from dir of t; an
// error is the chart's alone, the walk goes on.
func (l *loader) renderChart(ctx context.Context, t *tree, dir string) {
	key := "chart:" + t.key(dir)
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	name := t.display(dir)
	objs, err := l.opts.Chart(ctx, name)
	if err != nil {
		l.fail(fmt.Errorf("%s: rendering the Helm chart: %w", name, err))
	}
	l.objs = append(l.objs, objs...)
}

// loadTreeFile loads the regular file real of t, reporting it as name.
func (l *loader) loadTreeFile(t *tree, name, real string, info fs.FileInfo) {
	key := t.key(real)
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	if info.Size() > l.opts.MaxFileBytes {
		l.fail(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"file is %s, larger than the %s limit ("+l.opts.LimitHint("MaxFileBytes")+")",
			formatBytes(info.Size()), formatBytes(l.opts.MaxFileBytes))))
		return
	}
	f, err := t.fsys.Open(real)
	if err != nil {
		l.fail(treeError(name, err))
		return
	}
	defer f.Close()
	if data, ok := l.read(name, f); ok {
		l.decodeStream(name, data)
	}
}

// loadKustomizationFile renders the kustomization file named explicitly.
func (l *loader) loadKustomizationFile(file string) {
	dir := filepath.Dir(file)
	t, start, release, err := diskTree(dir, l.opts)
	if err != nil {
		l.fail(treeError(dir, err))
		return
	}
	defer release()
	kf, ok := findKustomization(t.fsys, start)
	if !ok {
		l.fail(newError(Source{File: file}, fs.ErrNotExist, "cannot read kustomization"))
		return
	}
	l.renderKustomization(t, start, kf)
}

// treeError wraps an error about the path name as an *Error, spelling out
// refusals of paths that leave the repository.
func treeError(name string, err error) *Error {
	if errors.Is(err, ErrOutsideRoot) {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
			if pe.Path != "" && pe.Path != "." {
				msg = pe.Path + ": " + msg
			}
		}
		return newError(Source{File: name}, err, "refusing to read: "+msg)
	}
	return ioError(name, err)
}
