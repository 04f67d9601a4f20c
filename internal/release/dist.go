package release

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DistOptions describe a release's files.
type DistOptions struct {
	// ModuleDir is truce's module; Out the directory the files go to.
	ModuleDir, Out string
	Stamp
	Targets []Target
	// Source is the repository URL (https://github.com/truce-dev/truce);
	// archives are downloaded from its releases page.
	Source  string
	License string
	// Created dates the SBOMs; zero is now.
	Created time.Time
}

// DistFiles lists the files Dist wrote.
type DistFiles struct {
	Binaries  map[Target]string
	Archives  map[Target]string
	SBOMs     map[Target]string
	Checksums string
	Krew      string
}

// Dist builds truce for every target and writes, under o.Out: the
// binaries (OS_ARCH/truce), archives truce_VERSION_OS_ARCH.tar.gz with the
// binary, LICENSE and README.md, an SPDX SBOM per binary, checksums.txt
// (sha256sum's format) over archives and SBOMs, and krew/truce.yaml.
func Dist(ctx context.Context, o DistOptions) (*DistFiles, error) {
	if o.Version == "" {
		return nil, fmt.Errorf("a release needs a version")
	}
	if err := os.MkdirAll(filepath.Join(o.Out, "krew"), 0o755); err != nil {
		return nil, err
	}
	d := &DistFiles{Binaries: map[Target]string{}, Archives: map[Target]string{}, SBOMs: map[Target]string{}}
	sums := map[string]string{}
	var krew []krewArchive
	for _, t := range o.Targets {
		base := fmt.Sprintf("truce_%s_%s_%s", o.Version, t.OS, t.Arch)
		bin := filepath.Join(o.Out, t.OS+"_"+t.Arch, "truce")
		if err := Build(ctx, o.ModuleDir, t, o.Stamp, bin); err != nil {
			return nil, err
		}
		d.Binaries[t] = bin

		archive := filepath.Join(o.Out, base+".tar.gz")
		files := []string{bin}
		for _, f := range []string{"LICENSE", "README.md"} {
			files = append(files, filepath.Join(o.ModuleDir, f))
		}
		if err := writeArchive(archive, files); err != nil {
			return nil, fmt.Errorf("writing %s: %w", archive, err)
		}
		d.Archives[t] = archive

		sbom := filepath.Join(o.Out, base+".spdx.json")
		if err := SBOM(bin, sbom, SBOMInfo{Version: o.Version, License: o.License, Source: o.Source, Created: o.Created}); err != nil {
			return nil, err
		}
		d.SBOMs[t] = sbom

		for _, f := range []string{archive, sbom} {
			sum, err := sha256File(f)
			if err != nil {
				return nil, err
			}
			sums[filepath.Base(f)] = sum
		}
		krew = append(krew, krewArchive{
			Target: t,
			URI:    fmt.Sprintf("%s/releases/download/%s/%s", o.Source, o.Version, filepath.Base(archive)),
			SHA256: sums[filepath.Base(archive)],
		})
	}
	d.Checksums = filepath.Join(o.Out, "checksums.txt")
	if err := writeChecksums(d.Checksums, sums); err != nil {
		return nil, err
	}
	d.Krew = filepath.Join(o.Out, "krew", "truce.yaml")
	if err := writeKrew(d.Krew, o.Version, o.Source, krew); err != nil {
		return nil, err
	}
	return d, nil
}

// writeArchive packs files, flat, into a gzipped tar.
func writeArchive(out string, files []string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, name := range files {
		if err := addFile(tw, name); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func addFile(tw *tar.Writer, name string) error {
	src, err := os.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.Base(name), Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

func sha256File(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeChecksums writes `sha256sum -c`'s format, sorted by file name.
func writeChecksums(out string, sums map[string]string) error {
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}
