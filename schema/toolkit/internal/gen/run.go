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

// module is one pinned module with the files gen wrote for it.
type module struct {
	pin
	Files []file
}

// file is one embedded CRD file; Embed is its path relative to the package.
type file struct {
	Embed string
	Size  int // uncompressed
	CRDs  []crdInfo
}

// run regenerates everything in dir, the schema/toolkit package directory.
func run(dir string) error {
	// go generate runs gen in the package directory; refuse to clear crds/
	// anywhere else.
	if _, err := os.Stat(filepath.Join(dir, "generate.go")); err != nil {
		return fmt.Errorf("run gen through go generate ./schema/toolkit: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	crdsDir := filepath.Join(dir, "crds")
	if err := os.RemoveAll(crdsDir); err != nil {
		return err
	}
	var mods []module
	seen := map[string]string{}
	for _, p := range pins() {
		m, err := generateModule(ctx, crdsDir, p)
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
	if err := writeGo(filepath.Join(dir, "zz_generated.go"), indexTemplate, mods); err != nil {
		return err
	}
	return writeGo(filepath.Join(dir, "doc.go"), docTemplate, mods)
}

func generateModule(ctx context.Context, crdsDir string, p pin) (module, error) {
	mv := p.Path + "@" + p.Version
	zipPath, err := download(ctx, p)
	if err != nil {
		return module{}, err
	}
	files, err := extract(zipPath, p)
	if err != nil {
		return module{}, err
	}
	outDir := filepath.Join(crdsDir, p.Dir)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return module{}, err
	}
	m := module{pin: p}
	for _, rel := range sortedKeys(files.crds) {
		data, dropped, err := dropUnserved(files.crds[rel])
		if err != nil {
			return module{}, fmt.Errorf("%s in %s: %w", rel, mv, err)
		}
		for _, d := range dropped {
			fmt.Fprintf(os.Stderr, "gen: %s in %s: dropped %s (served: false)\n", rel, mv, d)
		}
		crds, err := inspect(data)
		if err != nil {
			return module{}, fmt.Errorf("%s in %s: %w", rel, mv, err)
		}
		name := path.Base(rel) + ".gz"
		if err := writeGzip(filepath.Join(outDir, name), data); err != nil {
			return module{}, err
		}
		m.Files = append(m.Files, file{Embed: path.Join("crds", p.Dir, name), Size: len(data), CRDs: crds})
	}
	for name, data := range files.licences {
		if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
			return module{}, err
		}
	}
	return m, nil
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
