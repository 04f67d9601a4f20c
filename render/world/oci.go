package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/flux"
	"github.com/truce-dev/truce/render/helm"
)

// ociArtifact pulls an OCIRepository's artifact and unpacks it into a
// directory, once per Load, named in positions by URL@revision.
func (s *state) ociArtifact(ctx context.Context, namespace, name string) (string, error) {
	obj, ok := s.find(sourceGroup, "OCIRepository", namespace, name)
	if !ok {
		return "", fmt.Errorf("OCIRepository %s/%s is not in the repository", namespace, name)
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	repo, err := flux.ParseOCIRepository(namespace, name, spec)
	if err != nil {
		return "", err
	}
	p := &flux.OCIPuller{CacheDir: s.opts.Render.CacheDir, Offline: s.opts.Render.Offline, RegistryConfig: s.opts.RegistryConfig}
	if repo.SecretRef != "" {
		if p.SecretConfig, err = s.dockerConfigSecret(namespace, repo.SecretRef); err != nil {
			return "", fmt.Errorf("OCIRepository %s/%s: %w", namespace, name, err)
		}
		p.SecretName = "Secret " + namespace + "/" + repo.SecretRef
	}
	art, err := p.Pull(ctx, repo)
	if err != nil {
		return "", err
	}
	key := "oci:" + art.Path
	if dir, ok := s.checkouts[key]; ok {
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "truce-oci-")
	if err != nil {
		return "", err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	// An extracted layer is the artifact's content; a copied one is the
	// artifact, which kustomize-controller and helm-controller unpack.
	// Either way it is a tarball to unpack.
	mopts := s.opts.Render.Manifest
	if err := flux.ExtractTarGz(art.Path, dir, orDefault(mopts.MaxFileBytes, manifest.DefaultMaxFileBytes), orDefault(mopts.MaxTotalBytes, manifest.DefaultMaxTotalBytes)); err != nil {
		return "", fmt.Errorf("OCIRepository %s/%s (%s@%s): %w", namespace, name, repo.URL, art.Revision, err)
	}
	s.checkouts[key] = dir
	s.labels[dir] = repo.URL + "@" + shortDigest(art.Revision)
	return dir, nil
}

// shortDigest shortens the digest ending a revision to 12 hex digits,
// as Git commits are shortened in positions.
func shortDigest(revision string) string {
	const prefix = "sha256:"
	if i := strings.LastIndex(revision, prefix); i >= 0 && len(revision) > i+len(prefix)+12 {
		return revision[:i+len(prefix)+12]
	}
	return revision
}

func orDefault(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// ociSource is the directory a Kustomization of an OCIRepository builds
// from.
func (s *state) ociSource(ctx context.Context, namespace, name string) (string, error) {
	return s.ociArtifact(ctx, namespace, name)
}

// ociChart is the chart an OCIRepository holds, as a HelmRelease chartRef
// reads it: helm push puts the chart's directory in the layer.
func (s *state) ociChart(ctx context.Context, namespace, name string) (*helm.Chart, error) {
	dir, err := s.ociArtifact(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "Chart.yaml"))
	if len(matches) != 1 {
		if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err == nil {
			return s.loadChart(ctx, dir, dir)
		}
		return nil, fmt.Errorf("OCIRepository %s/%s (%s): the artifact holds no Helm chart", namespace, name, s.labels[dir])
	}
	return s.loadChart(ctx, filepath.Dir(matches[0]), dir)
}

// dockerConfigSecret writes the .dockerconfigjson of the docker-registry
// Secret namespace/name to a private file and returns its path, when the
// repository holds the Secret in plain data or stringData; "" when it does
// not (not there, or encrypted with SOPS): the registry then gets the
// credentials of --registry-config.
func (s *state) dockerConfigSecret(namespace, name string) (string, error) {
	const key = ".dockerconfigjson"
	v, err := s.plainSecret(namespace, name, key)
	if err != nil {
		return "", err
	}
	config := v[key]
	if config == "" {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "truce-registry-")
	if err != nil {
		return "", err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return "", fmt.Errorf("writing the registry credentials of Secret %s/%s: %w", namespace, name, err)
	}
	return path, nil
}
