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
	// Binaries are truce's, Helpers the Kyverno helpers beside them.
	Binaries map[Target]string
	Helpers  map[Target]string
	Archives map[Target]string
	// SBOMs describe the Binaries, HelperSBOMs the Helpers.
	SBOMs       map[Target]string
	HelperSBOMs map[Target]string
	Checksums   string
	Krew        string
}

// Dist builds truce and its Kyverno helper for every target and writes,
// under o.Out: the binaries (OS_ARCH/truce, OS_ARCH/truce-kyverno) and
// what Package makes of them.
func Dist(ctx context.Context, o DistOptions) (*DistFiles, error) {
	if o.Version == "" {
		return nil, fmt.Errorf("a release needs a version")
	}
	bins, helpers := map[Target]string{}, map[Target]string{}
	for _, t := range o.Targets {
		bin, helper, err := BuildBoth(ctx, o.ModuleDir, t, o.Stamp, filepath.Join(o.Out, t.OS+"_"+t.Arch))
		if err != nil {
			return nil, err
		}
		bins[t], helpers[t] = bin, helper
	}
	return Package(o, bins, helpers)
}

// Package writes, under o.Out, a release of built binaries: archives
// truce_VERSION_OS_ARCH.tar.gz with truce, the Kyverno helper next to it
// (where truce looks for it), LICENSE and README.md; an SPDX SBOM per
// binary (truce_VERSION_OS_ARCH.spdx.json,
// truce-kyverno_VERSION_OS_ARCH.spdx.json); checksums.txt (sha256sum's
// format) over archives and SBOMs; and krew/truce.yaml. Every target
// needs both binaries.
func Package(o DistOptions, bins, helpers map[Target]string) (*DistFiles, error) {
	if o.Version == "" {
		return nil, fmt.Errorf("a release needs a version")
	}
	if err := os.MkdirAll(filepath.Join(o.Out, "krew"), 0o755); err != nil {
		return nil, err
	}
	d := &DistFiles{
		Binaries: map[Target]string{}, Helpers: map[Target]string{}, Archives: map[Target]string{},
		SBOMs: map[Target]string{}, HelperSBOMs: map[Target]string{},
	}
	sums := map[string]string{}
	var krew []krewArchive
	for _, t := range o.Targets {
		bin, helper := bins[t], helpers[t]
		if bin == "" || helper == "" {
			return nil, fmt.Errorf("packaging %s: truce (%q) and %s (%q) are both needed", t, bin, HelperName, helper)
		}
		if filepath.Base(bin) != "truce" || filepath.Base(helper) != HelperName {
			// Archives are flat: the names are the installed ones.
			return nil, fmt.Errorf("packaging %s: the binaries must be named truce and %s, not %s and %s", t, HelperName, filepath.Base(bin), filepath.Base(helper))
		}
		d.Binaries[t], d.Helpers[t] = bin, helper
		suffix := fmt.Sprintf("_%s_%s_%s", o.Version, t.OS, t.Arch)

		archive := filepath.Join(o.Out, "truce"+suffix+".tar.gz")
		files := []string{bin, helper}
		for _, f := range []string{"LICENSE", "README.md"} {
			files = append(files, filepath.Join(o.ModuleDir, f))
		}
		if err := writeArchive(archive, files); err != nil {
			return nil, fmt.Errorf("writing %s: %w", archive, err)
		}
		d.Archives[t] = archive

		info := SBOMInfo{Version: o.Version, License: o.License, Source: o.Source, Created: o.Created}
		for _, b := range []struct {
			name, bin string
			sboms     map[Target]string
		}{{"truce", bin, d.SBOMs}, {HelperName, helper, d.HelperSBOMs}} {
			info.Name = b.name
			sbom := filepath.Join(o.Out, b.name+suffix+".spdx.json")
			if err := SBOM(b.bin, sbom, info); err != nil {
				return nil, err
			}
			b.sboms[t] = sbom
		}

		for _, f := range []string{archive, d.SBOMs[t], d.HelperSBOMs[t]} {
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
