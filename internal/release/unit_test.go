package release

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Target
		wantErr bool
	}{
		{in: "linux/arm64", want: Target{"linux", "arm64"}},
		{in: "linux", wantErr: true},
		{in: "linux/arm/v7", wantErr: true},
		{in: "/amd64", wantErr: true},
	} {
		got, err := ParseTarget(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseTarget(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// The image has no libc and runs one architecture per manifest: a binary
// for another platform, or one that is not a Go binary, is refused, and so
// is truce without its Kyverno helper. The test binary itself is a Go
// binary for the host, built with cgo on or off.
func TestImageRefusesWrongBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notGo := filepath.Join(t.TempDir(), "truce")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := Target{OS: "linux", Arch: "arm64"}
	if runtime.GOARCH == "arm64" {
		other.Arch = "amd64"
	}
	host := Target{OS: "linux", Arch: runtime.GOARCH}
	for _, tt := range []struct {
		name          string
		bins, helpers map[Target]string
		wantErr       string
	}{
		{"none", nil, nil, "no binaries"},
		{"darwin", map[Target]string{{"darwin", "arm64"}: self}, map[Target]string{{"darwin", "arm64"}: self}, "not a linux binary"},
		{"no helper", map[Target]string{host: self}, nil, "no truce-kyverno for linux/"},
		{"helper for another platform", map[Target]string{other: self}, map[Target]string{host: self}, "no truce-kyverno for " + other.String()},
		{"other arch", map[Target]string{other: self}, map[Target]string{other: self}, "is built for"},
		{"not Go", map[Target]string{host: notGo}, map[Target]string{host: notGo}, "build information"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Image(ImageOptions{Binaries: tt.bins, Helpers: tt.helpers, WorkDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// A dependency is recorded at the version it was built from: a module
// replaced by another at the replacement's, one of truce's own nested
// modules (replaced by its directory) at the release's version, never as
// a directory without a version.
func TestDepVersion(t *testing.T) {
	for _, tt := range []struct {
		name              string
		dep               debug.Module
		wantPath, wantVer string
	}{
		{name: "plain", dep: debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}, wantPath: "k8s.io/api", wantVer: "v0.37.2"},
		{
			name:     "replaced by a version",
			dep:      debug.Module{Path: "k8s.io/api", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}},
			wantPath: "k8s.io/api", wantVer: "v0.37.2",
		},
		{
			name:     "replaced by a fork",
			dep:      debug.Module{Path: "k8s.io/pod-security-admission", Version: "v0.36.2", Replace: &debug.Module{Path: "github.com/kyverno/pod-security-admission", Version: "v0.0.0-1"}},
			wantPath: "github.com/kyverno/pod-security-admission", wantVer: "v0.0.0-1",
		},
		{
			name: "nested module of this repository",
			dep: debug.Module{Path: "github.com/truce-dev/truce/engine/kyverno/helper/protocol", Version: "v0.0.0-00010101000000-000000000000",
				Replace: &debug.Module{Path: "./engine/kyverno/helper/protocol", Version: "(devel)"}},
			wantPath: "github.com/truce-dev/truce/engine/kyverno/helper/protocol", wantVer: "v1.2.3",
		},
		{
			name: "nested module, from the helper's module",
			dep: debug.Module{Path: "github.com/truce-dev/truce/engine/kyverno/helper/protocol", Version: "v0.0.0-00010101000000-000000000000",
				Replace: &debug.Module{Path: "./protocol", Version: "(devel)"}},
			wantPath: "github.com/truce-dev/truce/engine/kyverno/helper/protocol", wantVer: "v1.2.3",
		},
		{
			name:     "replaced by a directory outside",
			dep:      debug.Module{Path: "example.com/m", Version: "v1.0.0", Replace: &debug.Module{Path: "../m"}},
			wantPath: "example.com/m", wantVer: "v1.2.3",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path, version := depVersion(&tt.dep, "v1.2.3")
			if path != tt.wantPath || version != tt.wantVer {
				t.Fatalf("depVersion = %s %s, want %s %s", path, version, tt.wantPath, tt.wantVer)
			}
		})
	}
}

// A release's files, from binaries already built (copies of the test
// binary, a Go binary with build information): each archive holds truce
// and the helper beside it, each binary has its SBOM, checksums.txt covers
// archives and SBOMs, and krew installs both binaries.
func TestPackage(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	built := t.TempDir()
	bin, helper := filepath.Join(built, "truce"), filepath.Join(built, HelperName)
	for _, dst := range []string{bin, helper} {
		copyFile(t, self, dst)
	}
	targets := []Target{{"linux", "amd64"}, {"darwin", "arm64"}}
	o := DistOptions{
		ModuleDir: "../..", Out: t.TempDir(), Stamp: Stamp{Version: "v1.2.3"}, Targets: targets,
		Source: "https://github.com/truce-dev/truce", License: "Apache-2.0",
	}
	bins, helpers := map[Target]string{}, map[Target]string{}
	for _, tg := range targets {
		bins[tg], helpers[tg] = bin, helper
	}
	d, err := Package(o, bins, helpers)
	if err != nil {
		t.Fatal(err)
	}
	sums := readChecksums(t, d.Checksums)
	var krew krewPlugin
	kb, err := os.ReadFile(d.Krew)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(kb, &krew); err != nil {
		t.Fatal(err)
	}

	var want []string // every file checksums.txt should list
	for i, tg := range targets {
		suffix := "_v1.2.3_" + tg.OS + "_" + tg.Arch
		t.Run(tg.String(), func(t *testing.T) {
			if got, want := filepath.Base(d.Archives[tg]), "truce"+suffix+".tar.gz"; got != want {
				t.Errorf("archive %s, want %s", got, want)
			}
			if got, want := tarNames(t, d.Archives[tg]), []string{"LICENSE", "README.md", "truce", HelperName}; !slices.Equal(got, want) {
				t.Errorf("archive holds %v, want %v", got, want)
			}
			for _, tt := range []struct {
				sbom, want, wantDoc, wantRoot string
			}{
				{d.SBOMs[tg], "truce" + suffix + ".spdx.json", "truce-v1.2.3", "SPDXRef-Package-truce"},
				{d.HelperSBOMs[tg], HelperName + suffix + ".spdx.json", "truce-kyverno-v1.2.3", "SPDXRef-Package-truce-kyverno"},
			} {
				if filepath.Base(tt.sbom) != tt.want {
					t.Errorf("SBOM %s, want %s", filepath.Base(tt.sbom), tt.want)
				}
				doc := readSBOM(t, tt.sbom)
				if doc.Name != tt.wantDoc || doc.Packages[0].SPDXID != tt.wantRoot || doc.Packages[0].VersionInfo != "v1.2.3" ||
					doc.Relationships[0].Related != tt.wantRoot {
					t.Errorf("%s describes %s: %s %s", tt.want, doc.Name, doc.Packages[0].SPDXID, doc.Packages[0].VersionInfo)
				}
			}
			pl := krew.Spec.Platforms[i]
			if pl.Selector.MatchLabels["os"] != tg.OS || pl.Selector.MatchLabels["arch"] != tg.Arch || pl.SHA256 != sums[filepath.Base(d.Archives[tg])] {
				t.Errorf("krew platform %+v", pl)
			}
			var from []string
			for _, f := range pl.Files {
				from = append(from, f.From)
				if f.To != "." {
					t.Errorf("krew installs %s to %s, want . (beside truce)", f.From, f.To)
				}
			}
			if want := []string{"truce", HelperName, "LICENSE"}; !slices.Equal(from, want) || pl.Bin != "truce" {
				t.Errorf("krew installs %v and runs %s, want %v and truce", from, pl.Bin, want)
			}
		})
		want = append(want, filepath.Base(d.Archives[tg]), filepath.Base(d.SBOMs[tg]), filepath.Base(d.HelperSBOMs[tg]))
	}
	var listed []string
	for name, sum := range sums {
		listed = append(listed, name)
		got, err := sha256File(filepath.Join(o.Out, name))
		if err != nil || got != sum {
			t.Errorf("checksums.txt: %s %s, the file's is %s (%v)", name, sum, got, err)
		}
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("checksums.txt lists %v, want %v", listed, want)
	}
}

// A release is truce and its helper, under the names truce looks for.
func TestPackageRefuses(t *testing.T) {
	dir := t.TempDir()
	tg := Target{"linux", "amd64"}
	bin, helper := filepath.Join(dir, "truce"), filepath.Join(dir, HelperName)
	for _, tt := range []struct {
		name          string
		bins, helpers map[Target]string
		wantErr       string
	}{
		{"no helper", map[Target]string{tg: bin}, nil, "are both needed"},
		{"no truce", nil, map[Target]string{tg: helper}, "are both needed"},
		{"helper misnamed", map[Target]string{tg: bin}, map[Target]string{tg: filepath.Join(dir, "kyverno")}, "must be named truce and truce-kyverno"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Package(DistOptions{Out: t.TempDir(), Stamp: Stamp{Version: "v1"}, Targets: []Target{tg}}, tt.bins, tt.helpers)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// The image's layer holds both binaries at the root, executable by the
// image's user: truce finds the helper next to /truce.
func TestWriteLayer(t *testing.T) {
	dir := t.TempDir()
	bin, helper := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for name, data := range map[string]string{bin: "truce", helper: "helper"} {
		if err := os.WriteFile(name, []byte(data), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	layer := filepath.Join(dir, "layer.tar.gz")
	if err := writeLayer(layer, bin, helper, ""); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	forTar(t, layer, func(h *tar.Header, r io.Reader) {
		if h.Typeflag != tar.TypeReg {
			return
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = fmt.Sprintf("%o %s", h.Mode, b)
	})
	for _, tt := range []struct{ path, want string }{
		{Entrypoint, "755 truce"},
		{HelperPath, "755 helper"},
	} {
		if filepath.Dir(tt.path) != filepath.Dir(Entrypoint) {
			t.Errorf("%s is not beside %s", tt.path, Entrypoint)
		}
		if got[tt.path[1:]] != tt.want {
			t.Errorf("layer has %s as %q, want %q", tt.path, got[tt.path[1:]], tt.want)
		}
	}
}

func readSBOM(t *testing.T, path string) spdxDocument {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}
