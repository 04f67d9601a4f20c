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
// file a release has, runs the archive's truce with the Kyverno helper
// beside it, then builds the image from the same binaries (on linux),
// loads it back as crane and docker would, and runs the binaries taken out
// of its layer.
func TestSnapshot(t *testing.T) {
	// A static -trimpath build of truce shares no build cache with the
	// tests': cold, it compiles everything again (minutes on two cores).
	// The helper's shares `make helper`'s (built the same way), which
	// `make test-release` therefore runs first.
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
		if want := []string{"LICENSE", "README.md", "truce", "truce-kyverno"}; !slices.Equal(names, want) {
			t.Errorf("archive holds %v, want %v", names, want)
		}
		if base := filepath.Base(d.Archives[host]); base != "truce_"+testVersion+"_"+host.OS+"_"+host.Arch+".tar.gz" {
			t.Errorf("archive name %s", base)
		}
	})
	t.Run("checksums", func(t *testing.T) {
		sums := readChecksums(t, d.Checksums)
		for _, f := range []string{d.Archives[host], d.SBOMs[host], d.HelperSBOMs[host]} {
			want, err := sha256File(f)
			if err != nil {
				t.Fatal(err)
			}
			if sums[filepath.Base(f)] != want {
				t.Errorf("checksums.txt has %q for %s, want %s", sums[filepath.Base(f)], filepath.Base(f), want)
			}
		}
		if len(sums) != 3 {
			t.Errorf("checksums.txt lists %d files, want 3: %v", len(sums), sums)
		}
	})
	for _, tt := range []struct {
		name, sbom, root string
		// deps are modules the binary links, with their version ("" for
		// any).
		deps map[string]string
	}{
		{
			name: "sbom", sbom: d.SBOMs[host], root: "github.com/truce-dev/truce",
			deps: map[string]string{"stdlib": "", "helm.sh/helm/v4": "", "k8s.io/apiserver": "", "github.com/fluxcd/pkg/kustomize": ""},
		},
		{
			name: "helper sbom", sbom: d.HelperSBOMs[host], root: "github.com/truce-dev/truce/engine/kyverno/helper",
			deps: map[string]string{
				"stdlib": "", "github.com/kyverno/kyverno": "v1.19.1",
				"k8s.io/api": helperRequires(t, "k8s.io/api"), "k8s.io/client-go": helperRequires(t, "k8s.io/client-go"),
				"github.com/truce-dev/truce/engine/kyverno/helper/protocol": testVersion,
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(tt.sbom)
			if err != nil {
				t.Fatal(err)
			}
			var doc spdxDocument
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.SPDXVersion != "SPDX-2.3" || doc.Packages[0].Name != tt.root || doc.Packages[0].VersionInfo != testVersion {
				t.Errorf("document describes %s %s %s", doc.SPDXVersion, doc.Packages[0].Name, doc.Packages[0].VersionInfo)
			}
			have := map[string]string{}
			for _, p := range doc.Packages {
				have[p.Name] = p.VersionInfo
			}
			for m, v := range tt.deps {
				if have[m] == "" || (v != "" && have[m] != v) {
					t.Errorf("SBOM has %s at %q, want %q", m, have[m], v)
				}
			}
			if len(doc.Relationships) != len(doc.Packages) {
				t.Errorf("%d relationships for %d packages", len(doc.Relationships), len(doc.Packages))
			}
		})
	}
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
		// Every file krew installs is in the archive.
		names := tarNames(t, d.Archives[host])
		for _, f := range pl.Files {
			if !slices.Contains(names, f.From) {
				t.Errorf("krew installs %s, which the archive lacks (%v)", f.From, names)
			}
		}
	})
	t.Run("kyverno", func(t *testing.T) {
		// As a user unpacks it: truce finds the helper next to itself.
		dir := t.TempDir()
		untar(t, d.Archives[host], dir)
		checkKyverno(t, filepath.Join(dir, "truce"))
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
		testImage(t, host, d.Binaries[host], d.Helpers[host])
	})
}

func testImage(t *testing.T, host Target, binary, helper string) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := ImageOptions{
		Binaries: map[Target]string{host: binary}, Helpers: map[Target]string{host: helper}, CACerts: ca, WorkDir: t.TempDir(),
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
	// The filesystem: the binaries side by side, CA bundle, a /tmp and
	// the user's home, and no shell.
	tr := tar.NewReader(mutate.Extract(img))
	entries := map[string]*tar.Header{}
	root := t.TempDir()
	bin := filepath.Join(root, "truce")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[strings.TrimSuffix(h.Name, "/")] = h
		if h.Name == "truce" || h.Name == HelperName {
			extract(t, tr, filepath.Join(root, h.Name), h.FileInfo().Mode())
		}
	}
	for _, want := range []string{"truce", HelperName, "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "tmp", "home/nonroot"} {
		if entries[want] == nil {
			t.Errorf("image lacks /%s", want)
		}
	}
	for _, exe := range []string{"truce", HelperName} {
		if h := entries[exe]; h != nil && h.Mode&0o111 != 0o111 {
			t.Errorf("/%s has mode %o: the user 65532 cannot run it", exe, h.Mode)
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
	checkKyverno(t, bin)
}

// kyvernoPolicy adds a label to ConfigMaps and requires another: a
// mutation and a denial only Kyverno's engine, in the helper, can give.
const kyvernoPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: release-check}
spec:
  validationFailureAction: Enforce
  rules:
  - name: stamp
    match:
      any:
      - resources: {kinds: [ConfigMap]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels: {checked-by: kyverno}
  - name: require-app
    match:
      any:
      - resources: {kinds: [ConfigMap]}
    validate:
      message: "the label app is required"
      pattern:
        metadata:
          labels: {app: "?*"}
`

const kyvernoObjects = `apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: default, labels: {app: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: bare, namespace: default}
`

// checkKyverno runs `truce admit` from bin's directory on a Kyverno policy:
// with the helper beside truce, the policy mutates and denies; with truce
// alone, truce says it needs the helper. Neither $TRUCE_KYVERNO nor PATH
// leads to another helper.
func checkKyverno(t *testing.T, bin string) {
	t.Helper()
	work := t.TempDir()
	policy, objects := filepath.Join(work, "policy.yaml"), filepath.Join(work, "objects.yaml")
	for name, data := range map[string]string{policy: kyvernoPolicy, objects: kyvernoObjects} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + t.TempDir(), "HOME=" + work}
	admit := func(bin string) ([]byte, []byte, error) {
		cmd := exec.Command(bin, "admit", "-c", policy, "-f", objects, "-o", "json")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, []byte(stderr.String()), err
	}

	out, stderr, err := admit(bin)
	var report struct {
		Results []struct {
			Name    string
			Allowed bool
			Message string
			Object  struct {
				Metadata struct{ Labels map[string]string }
			}
		}
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("truce admit (exit %v): %v\n%s\n%s", err, jerr, out, stderr)
	}
	got := map[string]string{}
	for _, r := range report.Results {
		switch {
		case r.Allowed:
			got[r.Name] = "allowed, checked-by=" + r.Object.Metadata.Labels["checked-by"]
		default:
			got[r.Name] = "denied: " + r.Message
		}
	}
	if got["web"] != "allowed, checked-by=kyverno" || !strings.Contains(got["bare"], "the label app is required") {
		t.Errorf("with the helper beside truce: %v (exit %v)\n%s", got, err, stderr)
	}

	alone := filepath.Join(t.TempDir(), "truce")
	copyFile(t, bin, alone)
	out, stderr, err = admit(alone)
	if err == nil || !strings.Contains(string(stderr)+string(out), "the helper "+HelperName) {
		t.Errorf("truce without the helper: exit %v, want an error naming %s\n%s\n%s", err, HelperName, out, stderr)
	}
}

func extract(t *testing.T, r io.Reader, name string, mode os.FileMode) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	extract(t, f, dst, st.Mode())
}

// untar unpacks a flat gzipped tar into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	forTar(t, archive, func(h *tar.Header, r io.Reader) {
		extract(t, r, filepath.Join(dir, filepath.Base(h.Name)), h.FileInfo().Mode())
	})
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
	var names []string
	forTar(t, path, func(h *tar.Header, _ io.Reader) { names = append(names, h.Name) })
	slices.Sort(names)
	return names
}

// forTar calls f for each entry of the gzipped tar at path.
func forTar(t *testing.T, path string, f func(*tar.Header, io.Reader)) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	zr, err := gzip.NewReader(file)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(h, tr)
	}
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

// helperRequires is the version of module the helper's go.mod requires:
// Kyverno's Kubernetes, not truce's.
func helperRequires(t *testing.T, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", HelperModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("the helper's go.mod does not require %s", module)
	return ""
}
