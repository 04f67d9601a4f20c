package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"
)

// module is one pin with the files gen writes for it.
type module struct {
	pin
	Files    []file
	licences map[string][]byte
}

// file is one embedded CRD file; Embed is its path relative to the package.
type file struct {
	Embed string
	Size  int // uncompressed
	CRDs  []crdInfo
	data  []byte
}

// run regenerates everything in dir, the schema/toolkit package directory,
// reading the Git pins whose URLs mirrors maps from local repositories.
func run(dir string, mirrors map[string]string) error {
	// go generate runs gen in the package directory; refuse to clear crds/
	// anywhere else.
	if _, err := os.Stat(filepath.Join(dir, "generate.go")); err != nil {
		return fmt.Errorf("run gen through go generate ./schema/toolkit: %w", err)
	}
	if err := checkPins(pins(), mirrors); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var mods []module
	seen := map[string]string{}
	for _, p := range pins() {
		m, err := readModule(ctx, p, mirrors)
		if err != nil {
			return err
		}
		for _, f := range m.Files {
			for _, c := range f.CRDs {
				gk := c.Kind + "." + c.Group
				if prev, ok := seen[gk]; ok {
					return fmt.Errorf("%s is defined by both %s and %s", gk, prev, f.Embed)
				}
				seen[gk] = f.Embed
			}
		}
		mods = append(mods, m)
	}
	// Only now that every pin was read: a failure leaves crds/ as it was.
	crdsDir := filepath.Join(dir, "crds")
	if err := os.RemoveAll(crdsDir); err != nil {
		return err
	}
	for _, m := range mods {
		if err := writeModule(crdsDir, m); err != nil {
			return err
		}
	}
	if err := writeGo(filepath.Join(dir, "zz_generated.go"), indexTemplate, mods); err != nil {
		return err
	}
	return writeGo(filepath.Join(dir, "doc.go"), docTemplate, mods)
}

// checkPins rejects malformed pins, two pins writing one constant or
// directory, and a mirror no pin reads (a mistyped URL would otherwise
// send gen to the network).
func checkPins(ps []pin, mirrors map[string]string) error {
	names, dirs, gits := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range ps {
		if err := p.check(); err != nil {
			return err
		}
		if names[p.Name] || dirs[p.Dir] {
			return fmt.Errorf("pin %s: Name %s or Dir %s is used twice", p, p.Name, p.Dir)
		}
		names[p.Name], dirs[p.Dir] = true, true
		if p.Git != "" {
			gits[p.Git] = true
		}
	}
	for url := range mirrors {
		if !gits[url] {
			return fmt.Errorf("%s maps %s, which no pin reads", mirrorsEnv, url)
		}
	}
	return nil
}

// readPin reads the files p selects from its module or Git tag.
func readPin(ctx context.Context, p pin, mirrors map[string]string) (*moduleFiles, error) {
	if p.Git != "" {
		return readGit(ctx, p, mirrors)
	}
	zipPath, err := download(ctx, p)
	if err != nil {
		return nil, err
	}
	return extract(zipPath, p)
}

// readModule reads p's CRD files and licences, drops the API versions
// upstream does not serve and inspects what is left.
func readModule(ctx context.Context, p pin, mirrors map[string]string) (module, error) {
	files, err := readPin(ctx, p, mirrors)
	if err != nil {
		return module{}, err
	}
	m := module{pin: p, licences: files.licences}
	for _, rel := range sortedKeys(files.crds) {
		data, dropped, err := dropUnserved(files.crds[rel])
		if err != nil {
			return module{}, fmt.Errorf("%s in %s: %w", rel, p, err)
		}
		for _, d := range dropped {
			fmt.Fprintf(os.Stderr, "gen: %s in %s: dropped %s (served: false)\n", rel, p, d)
		}
		crds, err := inspect(data)
		if err != nil {
			return module{}, fmt.Errorf("%s in %s: %w", rel, p, err)
		}
		name := path.Join("crds", p.Dir, path.Base(rel)+".gz")
		m.Files = append(m.Files, file{Embed: name, Size: len(data), CRDs: crds, data: data})
	}
	return m, nil
}

// writeModule writes m's files, gzipped, and its licences under crdsDir.
func writeModule(crdsDir string, m module) error {
	outDir := filepath.Join(crdsDir, m.Dir)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, f := range m.Files {
		if err := writeGzip(filepath.Join(outDir, path.Base(f.Embed)), f.data); err != nil {
			return err
		}
	}
	for name, data := range m.licences {
		if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeGzip compresses data with a zero header (no name, no time) so that
// regenerating the same input gives the same bytes.
func writeGzip(name string, data []byte) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(name, buf.Bytes(), 0o644)
}
