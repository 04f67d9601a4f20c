package main

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// maxFileSize bounds what gen reads from one zip entry: the largest CRD
// (Argo CD's ApplicationSet) is about 1.6 MB.
const maxFileSize = 64 << 20

// licenceFiles are copied next to the CRDs when the module has them.
var licenceFiles = []string{"LICENSE", "NOTICE"}

// moduleFiles are the files gen takes from one module zip, keyed by their
// path inside the module.
type moduleFiles struct {
	crds     map[string][]byte
	licences map[string][]byte
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
	out := &moduleFiles{crds: map[string][]byte{}, licences: map[string][]byte{}}
	for _, f := range zr.File {
		rel, ok := strings.CutPrefix(f.Name, prefix)
		if !ok {
			continue
		}
		isCRD, _ := path.Match(p.Glob, rel)
		isLicence := false
		for _, l := range licenceFiles {
			isLicence = isLicence || rel == l
		}
		if !isCRD && !isLicence {
			continue
		}
		data, err := readEntry(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s from %s: %w", rel, zipPath, err)
		}
		if isCRD {
			out.crds[rel] = data
		} else {
			out.licences[rel] = data
		}
	}
	if len(out.crds) == 0 {
		return nil, fmt.Errorf("%s@%s has no files matching %s", p.Path, p.Version, p.Glob)
	}
	if _, ok := out.licences["LICENSE"]; !ok {
		return nil, fmt.Errorf("%s@%s has no LICENSE file", p.Path, p.Version)
	}
	return out, nil
}

func readEntry(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxFileSize+1))
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
