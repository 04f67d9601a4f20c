package world

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/bucket"
)

// bucketSource fetches a Bucket's objects, as source-controller does,
// into a directory of this Load: Kustomizations build from it and
// HelmCharts load charts from it as from a GitRepository's artifact.
// Positions name it URL@revision.
func (s *state) bucketSource(ctx context.Context, namespace, name string) (string, error) {
	obj, ok := s.find(sourceGroup, "Bucket", namespace, name)
	if !ok {
		return "", fmt.Errorf("sourceRef Bucket %s/%s is not in the repository", namespace, name)
	}
	b := &bucket.Bucket{Namespace: namespace, Name: name}
	var wrap struct {
		Spec *bucket.Spec `json:"spec"`
	}
	wrap.Spec = &b.Spec
	if err := decodeSpec(obj, &wrap); err != nil {
		return "", fmt.Errorf("reading Bucket %s/%s: %w", namespace, name, err)
	}
	creds, err := s.bucketCredentials(b)
	if err != nil {
		return "", err
	}
	mopts := s.opts.Render.Manifest
	f := &bucket.Fetcher{CacheDir: s.opts.Render.CacheDir, Offline: s.opts.Render.Offline,
		MaxFileBytes:  orDefault(mopts.MaxFileBytes, manifest.DefaultMaxFileBytes),
		MaxTotalBytes: orDefault(mopts.MaxTotalBytes, manifest.DefaultMaxTotalBytes)}
	art, err := f.Fetch(ctx, b, creds)
	if u, ok := render.AsUnpredictable(err); ok && creds == nil && b.Spec.SecretRef != nil && !s.opts.Render.Offline {
		u.Reason += fmt.Sprintf(" (spec.secretRef %s is not in the repository as plain data: pass its accesskey and secretkey with --bucket-secret DIR)", b.Spec.SecretRef.Name)
	}
	if err != nil {
		return "", err
	}
	key := "bucket:" + art.Dir
	if dir, ok := s.checkouts[key]; ok {
		return dir, nil
	}
	// The cache keeps the fetch for --offline; builds may write into
	// their source (a generated kustomization.yaml), so they get a copy.
	dir, err := os.MkdirTemp("", "truce-bucket-")
	if err != nil {
		return "", err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	if err := os.CopyFS(dir, os.DirFS(art.Dir)); err != nil {
		return "", fmt.Errorf("%s: copying the fetched objects: %w", b.Subject(), err)
	}
	s.checkouts[key] = dir
	s.labels[dir] = art.URL + "@" + shortDigest(art.Revision)
	return dir, nil
}

// bucketCredentials are the keys a Bucket's spec.secretRef names: the
// Secret's accesskey and secretkey when the repository holds it in plain
// data or stringData, else the --bucket-secret directory's files of those
// names; nil (anonymous) without either.
func (s *state) bucketCredentials(b *bucket.Bucket) (*bucket.Credentials, error) {
	if ref := b.Spec.SecretRef; ref != nil && ref.Name != "" {
		v, err := s.plainSecret(b.Namespace, ref.Name, "accesskey", "secretkey")
		if err != nil {
			return nil, err
		}
		if v["accesskey"] != "" && v["secretkey"] != "" {
			return &bucket.Credentials{AccessKey: v["accesskey"], SecretKey: v["secretkey"], From: fmt.Sprintf("Secret %s/%s", b.Namespace, ref.Name)}, nil
		}
	}
	dir := s.opts.BucketSecret
	if dir == "" {
		return nil, nil
	}
	read := func(k string) (string, error) {
		data, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil {
			return "", fmt.Errorf("--bucket-secret %s: reading the bucket credentials: %w", dir, err)
		}
		return strings.TrimRight(string(data), "\r\n"), nil
	}
	ak, err := read("accesskey")
	if err != nil {
		return nil, err
	}
	sk, err := read("secretkey")
	if err != nil {
		return nil, err
	}
	return &bucket.Credentials{AccessKey: ak, SecretKey: sk, From: "--bucket-secret " + dir}, nil
}

// plainSecret returns the values of keys of the Secret namespace/name when
// the repository holds it in plain data or stringData; nil when it does
// not (not there, or encrypted with SOPS).
func (s *state) plainSecret(namespace, name string, keys ...string) (map[string]string, error) {
	obj, ok := s.find("", "Secret", namespace, name)
	if !ok {
		return nil, nil
	}
	if _, encrypted := obj.Object["sops"]; encrypted {
		return nil, nil
	}
	var sec struct {
		Data       map[string]string `json:"data"`
		StringData map[string]string `json:"stringData"`
	}
	if err := decodeSpec(obj, &sec); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := sec.StringData[k]; ok {
			out[k] = v
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sec.Data[k])
		if err != nil {
			// Never the value: it is a secret.
			return nil, fmt.Errorf("reading Secret %s/%s: data.%s is not base64", namespace, name, k)
		}
		out[k] = string(raw)
	}
	return out, nil
}
