package release

import (
	"archive/tar"
	"compress/gzip"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs as distroless's "nonroot": deploy/ sets the same ids.
const (
	imageUID  = 65532
	imageHome = "/home/nonroot"
	// Entrypoint is where the binary lies in the image.
	Entrypoint = "/truce"
	// HelperPath is the Kyverno helper's place: next to truce, where truce
	// looks for it.
	HelperPath = "/" + HelperName
	// CACertsPath is where Go (and Debian, Alpine, distroless) look for the
	// CA bundle first.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// ImageOptions describe the image of one release.
type ImageOptions struct {
	// Binaries are static truce binaries by platform, linux only.
	Binaries map[Target]string
	// Helpers are the Kyverno helpers, static too: one for each platform
	// of Binaries.
	Helpers map[Target]string
	// CACerts is a PEM bundle copied to CACertsPath; empty or missing
	// leaves truce with its built-in Mozilla roots.
	CACerts string
	Stamp
	// Source is the repository URL, License an SPDX expression: both
	// become OCI labels.
	Source, License string
	// Created is the image's creation time; zero keeps builds reproducible.
	Created time.Time
	// WorkDir holds the layers while the image is written.
	WorkDir string
}

// Labels are the OCI annotations of the image and its configuration.
func (o ImageOptions) Labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "truce",
		"org.opencontainers.image.description": "Kubernetes admission and GitOps drift, computed together",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.licenses":    o.License,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Commit,
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

// Image builds one image per platform on an empty base (the binary needs no
// operating system) and an index over them, all with OCI media types.
func Image(o ImageOptions) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 {
		return nil, errors.New("building the image: no binaries")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, t := range sortedTargets(o.Binaries) {
		if t.OS != "linux" {
			return nil, fmt.Errorf("building the image: %s is not a linux binary", t)
		}
		if o.Helpers[t] == "" {
			return nil, fmt.Errorf("building the image: no %s for %s (truce runs Kyverno policies with it)", HelperName, t)
		}
		for _, b := range []string{o.Binaries[t], o.Helpers[t]} {
			if err := checkBinary(b, t); err != nil {
				return nil, err
			}
		}
		img, err := platformImage(o, t)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: t.OS, Architecture: t.Arch}},
		})
	}
	annotated, ok := mutate.Annotations(idx, o.Labels()).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("building the image: annotating the index did not return an index")
	}
	return annotated, nil
}

// checkBinary refuses a binary built for another platform or with cgo:
// the image has no libc to link against.
func checkBinary(path string, t Target) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	got := map[string]string{}
	for _, s := range bi.Settings {
		got[s.Key] = s.Value
	}
	if got["GOOS"] != t.OS || got["GOARCH"] != t.Arch {
		return fmt.Errorf("%s is built for %s/%s, not %s", path, got["GOOS"], got["GOARCH"], t)
	}
	if got["CGO_ENABLED"] != "0" {
		return fmt.Errorf("%s is built with cgo: the image has no C library (build with CGO_ENABLED=0)", path)
	}
	return nil
}

func platformImage(o ImageOptions, t Target) (v1.Image, error) {
	layerFile := filepath.Join(o.WorkDir, fmt.Sprintf("layer-%s-%s.tar.gz", t.OS, t.Arch))
	if err := writeLayer(layerFile, o.Binaries[t], o.Helpers[t], o.CACerts); err != nil {
		return nil, fmt.Errorf("building the %s layer: %w", t, err)
	}
	layer, err := tarball.LayerFromFile(layerFile, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("reading the %s layer %s: %w", t, layerFile, err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "truce release: " + Entrypoint + " " + HelperPath, Created: v1.Time{Time: o.Created}},
	})
	if err != nil {
		return nil, fmt.Errorf("building the %s image: %w", t, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = t.OS, t.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       fmt.Sprintf("%d:%d", imageUID, imageUID),
		WorkingDir: imageHome,
		Env:        []string{"HOME=" + imageHome},
		Labels:     o.Labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("configuring the %s image: %w", t, err)
	}
	return img, nil
}

// writeLayer writes the only layer, gzipped: truce and the Kyverno helper
// beside it, the CA bundle, the nonroot user's passwd entry, its home and a
// /tmp for renders.
func writeLayer(path, binary, helper, caCerts string) (err error) {
	f, err := os.Create(path)
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
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: time.Unix(0, 0)})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"etc", "etc/ssl", "etc/ssl/certs", "home"} {
		if err := dir(d, 0o755, 0); err != nil {
			return err
		}
	}
	if err := dir("home/nonroot", 0o700, imageUID); err != nil {
		return err
	}
	if err := dir("tmp", 0o1777, 0); err != nil {
		return err
	}
	// Git and ssh look the user up; distroless's entries.
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")); err != nil {
		return err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")); err != nil {
		return err
	}
	if caCerts != "" {
		pem, err := os.ReadFile(caCerts)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// truce falls back to its built-in roots.
		case err != nil:
			return fmt.Errorf("reading the CA bundle: %w", err)
		default:
			if err := file(CACertsPath[1:], 0o644, pem); err != nil {
				return err
			}
		}
	}
	for _, b := range []struct{ src, dst string }{{binary, Entrypoint}, {helper, HelperPath}} {
		if err := copyExecutable(tw, b.src, b.dst[1:]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// copyExecutable adds the file src to tw as name, executable by all.
func copyExecutable(tw *tar.Writer, src, name string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading the binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: st.Size(), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}
