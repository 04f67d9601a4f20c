package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageFiles are where WriteImage put the image.
type ImageFiles struct {
	// Layout is an OCI image layout holding the multi-arch index:
	// `crane push --index Layout REF`.
	Layout string
	// Tarballs are docker-style archives, one per platform:
	// `docker load -i FILE` or `crane push FILE REF`.
	Tarballs map[Target]string
}

// WriteImage writes idx under dir as an OCI layout (layout/) and one
// tarball per platform, tagged ref (ghcr.io/truce-dev/truce:v0.2.0).
func WriteImage(dir, ref string, idx v1.ImageIndex) (ImageFiles, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return ImageFiles{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	files := ImageFiles{Layout: filepath.Join(dir, "layout"), Tarballs: map[Target]string{}}
	if err := os.RemoveAll(files.Layout); err != nil {
		return files, err
	}
	p, err := layout.Write(files.Layout, empty.Index)
	if err != nil {
		return files, fmt.Errorf("writing the OCI layout %s: %w", files.Layout, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.String()})); err != nil {
		return files, fmt.Errorf("writing the OCI layout %s: %w", files.Layout, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return files, err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return files, err
		}
		t := Target{OS: d.Platform.OS, Arch: d.Platform.Architecture}
		path := filepath.Join(dir, fmt.Sprintf("truce-%s-%s.tar", t.OS, t.Arch))
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return files, fmt.Errorf("writing the image tarball %s: %w", path, err)
		}
		files.Tarballs[t] = path
	}
	return files, nil
}

func sortedTargets[V any](m map[Target]V) []Target {
	ts := make([]Target, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].String() < ts[j].String() })
	return ts
}

// ImageBuild is a whole `make image`: build, assemble, write.
type ImageBuild struct {
	ModuleDir, Out, Ref string
	Targets             []Target
	ImageOptions
}

// BuildImage builds static binaries of truce and its Kyverno helper per
// target under b.Out/bin, the image over them, and writes it with
// WriteImage.
func BuildImage(ctx context.Context, b ImageBuild) (ImageFiles, error) {
	o := b.ImageOptions
	o.Binaries, o.Helpers = map[Target]string{}, map[Target]string{}
	for _, t := range b.Targets {
		bin, helper, err := BuildBoth(ctx, b.ModuleDir, t, o.Stamp, filepath.Join(b.Out, "bin", t.OS+"_"+t.Arch))
		if err != nil {
			return ImageFiles{}, err
		}
		o.Binaries[t], o.Helpers[t] = bin, helper
	}
	if o.WorkDir == "" {
		work, err := os.MkdirTemp("", "truce-image-")
		if err != nil {
			return ImageFiles{}, err
		}
		defer os.RemoveAll(work)
		o.WorkDir = work
	}
	idx, err := Image(o)
	if err != nil {
		return ImageFiles{}, err
	}
	return WriteImage(b.Out, b.Ref, idx)
}
