package release

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

const testVersion = "v0.0.0-snapshot"

// TestSnapshot builds a release for the host platform only, checks every
// file a release has, then builds the image from the same binary (on
// linux), loads it back as crane and docker would, and runs the binary
// taken out of its layer.
func TestSnapshot(t *testing.T) {
	// A static -trimpath build shares no build cache with the tests': cold,
	// it compiles everything again (minutes on two cores). `make
	// test-release` runs it.
	if os.Getenv("TRUCE_TEST_RELEASE") == "" {
		t.Skip("set TRUCE_TEST_RELEASE=1 (make test-release): builds truce as a release does")
	}
	// A cold static build on two busy cores can take most of the test's
	// -timeout: the build may use all of it but a minute.
	deadline := time.Now().Add(45 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	host := Target{OS: runtime.GOOS, Arch: runtime.GOARCH}
	out := t.TempDir()
	start := time.Now()
	d, err := Dist(ctx, DistOptions{
		ModuleDir: "../..", Out: out, Targets: []Target{host},
		Stamp:  Stamp{Version: testVersion, Commit: "0123abcd"},
		Source: "https://github.com/truce-dev/truce", License: "Apache-2.0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release for %s in %s", host, time.Since(start).Round(time.Second))

	t.Run("archive", func(t *testing.T) {
		names := tarNames(t, d.Archives[host])
		if want := []string{"LICENSE", "README.md", "truce"}; !slices.Equal(names, want) {
			t.Errorf("archive holds %v, want %v", names, want)
		}
		if base := filepath.Base(d.Archives[host]); base != "truce_"+testVersion+"_"+host.OS+"_"+host.Arch+".tar.gz" {
			t.Errorf("archive name %s", base)
		}
	})
	t.Run("checksums", func(t *testing.T) {
		sums := readChecksums(t, d.Checksums)
		for _, f := range []string{d.Archives[host], d.SBOMs[host]} {
			want, err := sha256File(f)
			if err != nil {
				t.Fatal(err)
			}
			if sums[filepath.Base(f)] != want {
				t.Errorf("checksums.txt has %q for %s, want %s", sums[filepath.Base(f)], filepath.Base(f), want)
			}
		}
		if len(sums) != 2 {
			t.Errorf("checksums.txt lists %d files, want 2: %v", len(sums), sums)
		}
	})
	t.Run("sbom", func(t *testing.T) {
		b, err := os.ReadFile(d.SBOMs[host])
		if err != nil {
			t.Fatal(err)
		}
		var doc spdxDocument
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.SPDXVersion != "SPDX-2.3" || doc.Packages[0].Name != "github.com/truce-dev/truce" || doc.Packages[0].VersionInfo != testVersion {
			t.Errorf("document describes %s %s %s", doc.SPDXVersion, doc.Packages[0].Name, doc.Packages[0].VersionInfo)
		}
		have := map[string]string{}
		for _, p := range doc.Packages {
			have[p.Name] = p.VersionInfo
		}
		for _, m := range []string{"stdlib", "helm.sh/helm/v4", "k8s.io/apiserver", "github.com/fluxcd/pkg/kustomize"} {
			if have[m] == "" {
				t.Errorf("SBOM lacks %s", m)
			}
		}
		if len(doc.Relationships) != len(doc.Packages) {
			t.Errorf("%d relationships for %d packages", len(doc.Relationships), len(doc.Packages))
		}
	})
	t.Run("krew", func(t *testing.T) {
		b, err := os.ReadFile(d.Krew)
		if err != nil {
			t.Fatal(err)
		}
		var p krewPlugin
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			t.Fatal(err)
		}
		sum, _ := sha256File(d.Archives[host])
		if p.Kind != "Plugin" || p.Spec.Version != testVersion || len(p.Spec.Platforms) != 1 {
			t.Fatalf("manifest: %s", b)
		}
		pl := p.Spec.Platforms[0]
		wantURI := "https://github.com/truce-dev/truce/releases/download/" + testVersion + "/" + filepath.Base(d.Archives[host])
		if pl.SHA256 != sum || pl.URI != wantURI || pl.Bin != "truce" || pl.Selector.MatchLabels["os"] != host.OS || pl.Selector.MatchLabels["arch"] != host.Arch {
			t.Errorf("platform %+v, want sha256 %s uri %s", pl, sum, wantURI)
		}
	})
	t.Run("version", func(t *testing.T) {
		got := runVersion(t, d.Binaries[host])
		if got.Version != testVersion || got.Commit != "0123abcd" {
			t.Errorf("truce version says %s %s", got.Version, got.Commit)
		}
	})
	t.Run("image", func(t *testing.T) {
		if host.OS != "linux" {
			t.Skip("the image holds a linux binary")
		}
		testImage(t, host, d.Binaries[host])
	})
}

func testImage(t *testing.T, host Target, binary string) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := ImageOptions{
		Binaries: map[Target]string{host: binary}, CACerts: ca, WorkDir: t.TempDir(),
		Stamp: Stamp{Version: testVersion, Commit: "0123abcd"}, Source: "https://github.com/truce-dev/truce", License: "Apache-2.0",
	}
	idx, err := Image(o)
	if err != nil {
		t.Fatal(err)
	}
	const ref = "ghcr.io/truce-dev/truce:" + testVersion
	files, err := WriteImage(dir, ref, idx)
	if err != nil {
		t.Fatal(err)
	}

	// crane push --index reads the layout.
	lp, err := layout.ImageIndexFromPath(files.Layout)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := lp.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(outer.Manifests) != 1 || outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("layout index: %+v", outer.Manifests)
	}
	loaded, err := lp.ImageIndex(outer.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := loaded.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || im.Annotations["org.opencontainers.image.version"] != testVersion {
		t.Errorf("index %s annotations %v", im.MediaType, im.Annotations)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if !slices.Equal(platforms, []string{host.String()}) {
		t.Errorf("index platforms %v, want [%s]", platforms, host)
	}
	img, err := loaded.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, host)

	// docker load reads the tarball.
	timg, err := tarball.ImageFromPath(files.Tarballs[host], nil)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, timg, host)
}

func checkImage(t *testing.T, img v1.Image, host Target) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/truce"}) || cf.Config.User != "65532:65532" || cf.OS != host.OS || cf.Architecture != host.Arch {
		t.Errorf("config: entrypoint %v user %q platform %s/%s", cf.Config.Entrypoint, cf.Config.User, cf.OS, cf.Architecture)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/truce-dev/truce",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": "0123abcd",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	// The filesystem: the binary, CA bundle, a /tmp and the user's home,
	// and no shell.
	tr := tar.NewReader(mutate.Extract(img))
	entries := map[string]*tar.Header{}
	bin := filepath.Join(t.TempDir(), "truce")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[strings.TrimSuffix(h.Name, "/")] = h
		if h.Name == "truce" {
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	for _, want := range []string{"truce", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "tmp", "home/nonroot"} {
		if entries[want] == nil {
			t.Errorf("image lacks /%s", want)
		}
	}
	if h := entries["home/nonroot"]; h != nil && h.Uid != 65532 {
		t.Errorf("/home/nonroot is owned by %d", h.Uid)
	}
	if entries["bin/sh"] != nil {
		t.Error("image has a shell")
	}
	if got := runVersion(t, bin); got.Version != testVersion {
		t.Errorf("the image's truce says version %s", got.Version)
	}
}

type versionOutput struct {
	Version, Commit string
	Reproduces      []struct{ Name, Version string }
}

func runVersion(t *testing.T, bin string) versionOutput {
	t.Helper()
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	var v versionOutput
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(v.Reproduces) == 0 {
		t.Errorf("truce version names no reproduced tool: %s", out)
	}
	return v
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	slices.Sort(names)
	return names
}

func readChecksums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}
