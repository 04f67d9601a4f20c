package main

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// maxFileSize bounds what gen reads from one zip entry or Git blob: the
// largest CRD (Argo CD's ApplicationSet) is about 1.6 MB.
const maxFileSize = 64 << 20

// licenceFiles are copied next to the CRDs when the module has them.
var licenceFiles = []string{"LICENSE", "NOTICE"}

// moduleFiles are the files gen takes from one module zip or Git tree,
// keyed by their path inside the module or repository.
type moduleFiles struct {
	crds     map[string][]byte
	licences map[string][]byte
}

func newModuleFiles() *moduleFiles {
	return &moduleFiles{crds: map[string][]byte{}, licences: map[string][]byte{}}
}

// selects reports whether the file at rel, slash-separated and relative to
// the module or repository root, is a CRD file p selects or a licence.
func (p pin) selects(rel string) (crd, licence bool) {
	crd, _ = path.Match(p.Glob, rel)
	for _, l := range licenceFiles {
		licence = licence || rel == l
	}
	return crd, licence
}

// add records data as the CRD file or licence at rel.
func (m *moduleFiles) add(p pin, rel string, data []byte) {
	if crd, _ := p.selects(rel); crd {
		m.crds[rel] = data
	} else {
		m.licences[rel] = data
	}
}

// complete fails unless p's glob matched a file and a LICENSE was found.
func (m *moduleFiles) complete(p pin) error {
	if len(m.crds) == 0 {
		return fmt.Errorf("%s has no files matching %s", p, p.Glob)
	}
	if _, ok := m.licences["LICENSE"]; !ok {
		return fmt.Errorf("%s has no LICENSE file", p)
	}
	return nil
}

// extract reads the files p selects, and the licence files, from the module
// zip at zipPath.
func extract(zipPath string, p pin) (*moduleFiles, error) {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", zipPath, err)
	}
	defer zr.Close()
	prefix := p.Path + "@" + p.Version + "/"
	out := newModuleFiles()
	for _, f := range zr.File {
		rel, ok := strings.CutPrefix(f.Name, prefix)
		if !ok {
			continue
		}
		if crd, licence := p.selects(rel); !crd && !licence {
			continue
		}
		data, err := readEntry(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s from %s: %w", rel, zipPath, err)
		}
		out.add(p, rel, data)
	}
	if err := out.complete(p); err != nil {
		return nil, err
	}
	return out, nil
}

func readEntry(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readLimited(rc)
}

// readLimited reads r to the end, failing beyond maxFileSize bytes.
func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return data, nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
