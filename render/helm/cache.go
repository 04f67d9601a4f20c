package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cacheDir lays out what Puller keeps under CacheDir/helm:
//
//	index/  repository index files, named by the repository URL's hash
//	blobs/  chart archives as downloaded, named by the URL's hash
//	charts/ pulled charts, named by repository, chart and resolved version
//
// Every file is written to a temporary name and renamed, so concurrent
// truce processes sharing the cache never see half a file.
type cacheDir string

func (c cacheDir) index() string { return filepath.Join(string(c), "index") }
func (c cacheDir) blobs() *diskCache {
	return &diskCache{dir: filepath.Join(string(c), "blobs"), ext: ".tgz"}
}

// chartPath is where the archive of chart at version from repoURL is kept.
func (c cacheDir) chartPath(repoURL, chart, version string) string {
	return filepath.Join(string(c), "charts", hashKey(normalizeRepoURL(repoURL), chart, version), "chart.tgz")
}

// indexName names a repository's index in the cache, as Helm names the
// index of a repository it knows by name.
func indexName(repoURL string) string {
	return "truce-" + hashKey(normalizeRepoURL(repoURL))[:32]
}

// hashKey is a file name for a tuple of strings.
func hashKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// diskCache is a content store keyed by arbitrary strings.
type diskCache struct {
	dir string
	ext string
}

func (d *diskCache) path(key string) string { return filepath.Join(d.dir, hashKey(key)+d.ext) }

func (d *diskCache) get(key string) ([]byte, bool) {
	data, err := os.ReadFile(d.path(key))
	if err != nil || len(data) == 0 {
		return nil, false
	}
	return data, true
}

func (d *diskCache) put(key string, data []byte) error {
	return writeFileAtomic(d.path(key), data)
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing to the cache: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s to the cache: %w", path, err)
	}
	return nil
}

// copyFile copies a regular file, for index files handed to Helm's
// downloader in its own temporary repository cache.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// exists reports whether path exists; other errors count as absent.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// normalizeRepoURL makes equivalent spellings of a repository URL share
// cache entries.
func normalizeRepoURL(u string) string { return strings.TrimRight(u, "/") }
