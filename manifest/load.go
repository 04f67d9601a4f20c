package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadPaths loads every object from paths, in order.
//
// A path may be a file, which is read whatever its extension, a directory,
// or "-", which reads Options.Stdin. A directory that holds a kustomization
// (kustomization.yaml, kustomization.yml or Kustomization) is rendered with
// kustomize, and only through it: files next to it that it does not
// reference are not loaded, as with kustomize-controller and Argo CD. Any
// other directory is walked recursively for *.yaml, *.yml and *.json files
// (the extensions kubectl apply -R accepts, matched case-sensitively like
// kubectl does), rendering instead of descending into every subdirectory
// that holds a kustomization. A kustomization file named explicitly is
// rendered too. Directories are walked in lexical order, entry by entry, so
// results are deterministic. Entries whose name starts with "." inside a
// walked directory (.git, .github workflows, editor backups) are skipped;
// name such a path explicitly to load it. A directory without any manifest
// file is an error, so that a mistyped path does not look like an empty
// desired state. A file or kustomization reached through several paths is
// loaded once.
//
// Inside a directory, symlinks are followed only when they stay inside the
// repository (see Options.RepositoryRoot); kustomize is confined the same
// way, never reaches the network and runs no plugins. Objects rendered by
// kustomize carry the resource file and line they were written on where
// that can be traced, and the kustomization in Source.Kustomization.
//
// Like Decode, LoadPaths keeps going after bad documents and files, and
// returns the objects that loaded cleanly together with an errors.Join of
// all problems. Cancelling ctx stops loading before the next file or
// kustomization; the returned error then also matches ctx.Err().
func LoadPaths(ctx context.Context, paths []string, opts Options) ([]Object, error) {
	l := loader{decoder: newDecoder(opts), seen: make(map[string]bool)}
	for _, p := range paths {
		if !l.proceed(ctx) {
			break
		}
		if p == "-" {
			l.loadStdin()
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			l.fail(ioError(p, err))
			continue
		}
		if info.IsDir() {
			l.loadDir(ctx, p)
		} else {
			l.loadFile(p, info)
		}
	}
	return l.result()
}

type loader struct {
	*decoder
	// seen holds the absolute paths of files already loaded.
	seen      map[string]bool
	cancelled bool
	// edit, when set, changes the kustomization file of the kustomization
	// being built before kustomize reads it (BuildKustomization).
	edit KustomizationEdit
}

// proceed reports whether another file may be loaded, recording the
// context's error the first time it is done.
func (l *loader) proceed(ctx context.Context) bool {
	if l.stopped || l.cancelled {
		return false
	}
	if err := ctx.Err(); err != nil {
		l.cancelled = true
		l.errs = append(l.errs, fmt.Errorf("manifest: loading stopped: %w", err))
		return false
	}
	return true
}

func (l *loader) loadStdin() {
	if l.seen["-"] {
		return
	}
	l.seen["-"] = true
	if l.opts.Stdin == nil {
		l.fail(newError(Source{File: StdinName}, os.ErrInvalid, `"-" given but Options.Stdin is nil`))
		return
	}
	if data, ok := l.read(StdinName, l.opts.Stdin); ok {
		l.decodeStream(StdinName, data)
	}
}

// loadDir loads the directory dir from disk: through kustomize when it
// holds a kustomization, else by walking it.
func (l *loader) loadDir(ctx context.Context, dir string) {
	t, start, release, err := diskTree(dir, l.opts)
	if err != nil {
		l.fail(treeError(dir, err))
		return
	}
	defer release()
	l.walkTree(ctx, t, start)
}

func hasManifestExt(name string) bool {
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// loadFile loads one file. The size limit is checked against the file's
// metadata before reading, and again while reading for files whose size is
// not known up front or that grow while being read.
func (l *loader) loadFile(path string, info fs.FileInfo) {
	if isKustomizationName(filepath.Base(path)) {
		// Naming a kustomization means "build it", as kubectl -k
		// and GitOps tools would; its YAML is not an object.
		l.loadKustomizationFile(path)
		return
	}
	key := path
	if abs, err := filepath.Abs(path); err == nil {
		key = abs
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			key = real
		}
	}
	if l.seen[key] {
		return
	}
	l.seen[key] = true

	if info.Mode().IsRegular() && info.Size() > l.opts.MaxFileBytes {
		l.fail(newError(Source{File: path}, ErrTooLarge, fmt.Sprintf(
			"file is %s, larger than the %s limit ("+l.opts.LimitHint("MaxFileBytes")+")",
			formatBytes(info.Size()), formatBytes(l.opts.MaxFileBytes))))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		l.fail(ioError(path, err))
		return
	}
	defer f.Close()
	if data, ok := l.read(path, f); ok {
		l.decodeStream(path, data)
	}
}

// ioError wraps an I/O error as an *Error for path, keeping the cause for
// errors.Is (fs.ErrNotExist, fs.ErrPermission, ...).
func ioError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Op + ": " + pe.Err.Error()
	}
	return newError(Source{File: path}, err, "cannot read: "+msg)
}

// formatBytes renders n for messages, e.g. "16 MiB" or "1.5 KiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTP"[exp]) + "iB"
}
