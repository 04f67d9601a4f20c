package bucket

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// cache is one bucket's place in the cache directory:
// buckets/KEY/REVISION/ holds a fetch, buckets/KEY/latest names the last
// one. KEY digests what decides the content besides the objects: URL,
// prefix and ignore rules.
type cache struct {
	dir, url string
}

func (f *Fetcher) cache(b *Bucket) *cache {
	ignore := "\x00none"
	if b.Spec.Ignore != nil {
		ignore = *b.Spec.Ignore
	}
	sum := sha256.Sum256([]byte(b.URL() + "\x00" + b.Spec.Prefix + "\x00" + ignore))
	return &cache{dir: filepath.Join(f.CacheDir, "buckets", hex.EncodeToString(sum[:12])), url: b.URL()}
}

const latestFile = "latest"

// latest is the last fetch kept, if any.
func (c *cache) latest() (*Artifact, bool) {
	data, err := os.ReadFile(filepath.Join(c.dir, latestFile))
	if err != nil {
		return nil, false
	}
	rev := strings.TrimSpace(string(data))
	dir, ok := c.revisionDir(rev)
	if !ok {
		return nil, false
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return nil, false
	}
	return &Artifact{Dir: dir, URL: c.url, Revision: rev}, true
}

// revisionDir is where the fetch of rev is kept; false for a revision
// that is not sha256:HEX (a damaged latest file).
func (c *cache) revisionDir(rev string) (string, bool) {
	hexSum, ok := strings.CutPrefix(rev, "sha256:")
	if _, err := hex.DecodeString(hexSum); !ok || err != nil || len(hexSum) != 2*sha256.Size {
		return "", false
	}
	return filepath.Join(c.dir, hexSum), true
}

// store returns the fetch of idx's revision, calling fetch to fill a
// new directory when the cache lacks it; it becomes the latest, and
// older fetches of the bucket are removed.
func (c *cache) store(idx index, fetch func(dir string) error) (*Artifact, error) {
	rev := idx.revision()
	dir, _ := c.revisionDir(rev)
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("caching the bucket: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		tmp, err := os.MkdirTemp(c.dir, "fetch-")
		if err != nil {
			return nil, fmt.Errorf("caching the bucket: %w", err)
		}
		defer os.RemoveAll(tmp)
		if err := fetch(tmp); err != nil {
			return nil, err
		}
		// Another run may have kept the same revision meanwhile: its
		// content is the same.
		if err := os.Rename(tmp, dir); err != nil {
			if _, statErr := os.Stat(dir); statErr != nil {
				return nil, fmt.Errorf("caching the bucket: %w", err)
			}
		}
	}
	if err := writeAtomic(filepath.Join(c.dir, latestFile), []byte(rev+"\n")); err != nil {
		return nil, fmt.Errorf("caching the bucket: %w", err)
	}
	c.prune(filepath.Base(dir))
	return &Artifact{Dir: dir, URL: c.url, Revision: rev}, nil
}

// prune removes the fetches other than keep; best effort, as a fetch
// under way elsewhere is left alone by its fetch- name.
func (c *cache) prune(keep string) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != keep && !strings.HasPrefix(e.Name(), "fetch-") {
			_ = os.RemoveAll(filepath.Join(c.dir, e.Name()))
		}
	}
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".latest-")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
