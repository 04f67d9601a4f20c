package jsonnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	gojsonnet "github.com/google/go-jsonnet"

	"github.com/truce-dev/truce/manifest"
)

// importer is go-jsonnet's FileImporter confined to the repository, like
// Argo CD's confinedImporter: a candidate is located with stat calls only,
// in FileImporter's order (the importing file's directory, then the library
// paths from last to first), and must resolve, symlinks followed, to a
// regular file inside root no larger than MaxFileBytes before FileImporter
// reads it. Checking before reading matters: FileImporter reads whole
// files, so an import of /dev/zero would exhaust memory before any check
// after the read ran.
type importer struct {
	files    *gojsonnet.FileImporter
	root     string
	maxFile  int64
	maxTotal int64
	display  func(string) string

	// total is what the imports read so far, each file once.
	total int64
	seen  map[string]bool
	// refusal is the first import refused on purpose; go-jsonnet turns
	// importer errors into plain messages, so it is kept to be returned
	// with its classification.
	refusal *manifest.Error
}

var _ gojsonnet.Importer = (*importer)(nil)

func (i *importer) Import(importedFrom, importedPath string) (gojsonnet.Contents, string, error) {
	dir, _ := filepath.Split(importedFrom)
	foundAt, err := i.locate(dir, importedPath)
	if err != nil {
		return gojsonnet.Contents{}, "", err
	}
	if err := i.check(foundAt, importedFrom, importedPath); err != nil {
		return gojsonnet.Contents{}, "", err
	}
	return i.files.Import(importedFrom, importedPath)
}

// locate finds the file FileImporter would read for importedPath.
func (i *importer) locate(dir, importedPath string) (string, error) {
	bases := []string{dir}
	for j := len(i.files.JPaths) - 1; j >= 0; j-- {
		bases = append(bases, i.files.JPaths[j])
	}
	if filepath.IsAbs(importedPath) {
		bases = []string{""}
	}
	for _, base := range bases {
		p := importedPath
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		_, err := os.Lstat(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("couldn't open import %q: no match locally or in the Jsonnet library paths", importedPath)
}

// check refuses foundAt unless it is a regular file inside the root within
// the size limits.
func (i *importer) check(foundAt, importedFrom, importedPath string) error {
	src := manifest.Source{File: i.display(importedFrom)}
	if importedFrom == "" {
		src.File = i.display(foundAt) // the evaluated file itself
	}
	refuse := func(kind error, msg string) error {
		e := &manifest.Error{Source: src, Msg: msg, Err: kind}
		if i.refusal == nil {
			i.refusal = e
		}
		return e
	}
	real, err := filepath.EvalSymlinks(foundAt)
	if err != nil {
		return fmt.Errorf("cannot resolve import %q: %w", importedPath, err)
	}
	if !inside(real, i.root) {
		return refuse(manifest.ErrOutsideRoot, fmt.Sprintf(
			"refusing import %q: it resolves outside the repository root", importedPath))
	}
	info, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("cannot read import %q: %w", importedPath, err)
	}
	if !info.Mode().IsRegular() {
		return refuse(fs.ErrInvalid, fmt.Sprintf("refusing import %q: not a regular file", importedPath))
	}
	if info.Size() > i.maxFile {
		return refuse(manifest.ErrTooLarge, fmt.Sprintf(
			"refusing import %q: %d bytes, larger than the %d-byte limit (MaxFileBytes)", importedPath, info.Size(), i.maxFile))
	}
	if i.seen == nil {
		i.seen = make(map[string]bool)
	}
	if !i.seen[real] {
		i.seen[real] = true
		if i.total += info.Size(); i.total > i.maxTotal {
			return refuse(manifest.ErrTooLarge, fmt.Sprintf(
				"refusing import %q: the program's imports exceed the %d-byte limit (MaxTotalBytes)", importedPath, i.maxTotal))
		}
	}
	return nil
}

// inside reports whether path is strictly below root; both are clean,
// absolute and free of symlinks.
func inside(path, root string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}
