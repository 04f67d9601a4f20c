// Package ocitest serves OCI artifacts from a loopback registry for
// tests: the read side of the OCI distribution API, enough for oras-go
// and Helm's registry client to list tags and pull manifests and blobs.
package ocitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Registry is an OCI registry on a loopback address, filled with Push.
type Registry struct {
	*httptest.Server
	mu        sync.Mutex
	blobs     map[string][]byte
	manifests map[string][]byte   // repository:reference
	tags      map[string][]string // repository -> tags
	// Requests counts the requests served.
	Requests atomic.Int64
	// Corrupt serves every blob over 100 bytes altered under its true
	// digest, to prove clients check digests.
	Corrupt atomic.Bool
	// user and password, when set, are required of every request as
	// basic auth.
	user, password string
}

// RequireBasicAuth makes the registry answer 401 to requests without
// user and password, as a private registry does.
func (r *Registry) RequireBasicAuth(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.password = user, password
}

// DockerConfig writes a Docker config.json (the file `helm registry
// login` and `docker login` write) holding user and password for this
// registry, and returns its path.
func (r *Registry) DockerConfig(t testing.TB, user, password string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{r.Host(): map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// NewRegistry starts a registry, closed when the test ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{blobs: map[string][]byte{}, manifests: map[string][]byte{}, tags: map[string][]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// Host is the registry as a host of oci:// URLs.
func (r *Registry) Host() string { return strings.TrimPrefix(r.URL, "http://") }

// Layer is one layer of an artifact.
type Layer struct {
	MediaType string
	Data      []byte
}

// Push stores an artifact of layers, with an empty config, as
// repository:tag and returns its manifest digest.
func (r *Registry) Push(t testing.TB, repository, tag string, layers ...Layer) string {
	t.Helper()
	return r.PushWithConfig(t, repository, tag, Layer{MediaType: "application/vnd.oci.empty.v1+json", Data: []byte("{}")}, layers...)
}

// PushWithConfig stores an artifact of config and layers (a Helm chart:
// its metadata as config, the packaged chart as layer) as repository:tag
// and returns its manifest digest.
func (r *Registry) PushWithConfig(t testing.TB, repository, tag string, config Layer, layers ...Layer) string {
	t.Helper()
	descs := make([]any, len(layers))
	for i, l := range layers {
		descs[i] = r.blob(l.MediaType, l.Data)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        r.blob(config.MediaType, config.Data),
		"layers":        descs,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := Digest(manifest)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifests[repository+":"+tag] = manifest
	r.manifests[repository+":"+d] = manifest
	r.tags[repository] = append(r.tags[repository], tag)
	return d
}

func (r *Registry) blob(mediaType string, data []byte) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := Digest(data)
	r.blobs[d] = data
	return map[string]any{"mediaType": mediaType, "digest": d, "size": len(data)}
}

// Digest is data's sha256 digest as OCI spells it.
func Digest(data []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(data)) }

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.Requests.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.user != "" {
		user, password, ok := req.BasicAuth()
		if !ok || user != r.user || password != r.password {
			w.Header().Set("WWW-Authenticate", `Basic realm="ocitest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
	}
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	switch {
	case req.URL.Path == "/v2/" || req.URL.Path == "/v2":
		w.WriteHeader(http.StatusOK)
	case strings.HasSuffix(p, "/tags/list"):
		repository := strings.TrimSuffix(p, "/tags/list")
		tags := append([]string(nil), r.tags[repository]...)
		sort.Strings(tags)
		json.NewEncoder(w).Encode(map[string]any{"name": repository, "tags": tags})
	case strings.Contains(p, "/manifests/"):
		i := strings.LastIndex(p, "/manifests/")
		m, ok := r.manifests[p[:i]+":"+p[i+len("/manifests/"):]]
		if !ok {
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`, http.StatusNotFound)
			return
		}
		write(w, req, "application/vnd.oci.image.manifest.v1+json", m, Digest(m))
	case strings.Contains(p, "/blobs/"):
		d := p[strings.LastIndex(p, "/blobs/")+len("/blobs/"):]
		b, ok := r.blobs[d]
		if !ok {
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown"}]}`, http.StatusNotFound)
			return
		}
		if r.Corrupt.Load() && len(b) > 100 {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 0xff
		}
		write(w, req, "application/octet-stream", b, d)
	default:
		http.NotFound(w, req)
	}
}

// write serves data under its digest d (which a corrupt blob does not
// match).
func write(w http.ResponseWriter, req *http.Request, mediaType string, data []byte, d string) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", d)
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	if req.Method == http.MethodHead {
		return
	}
	w.Write(data)
}

// TarGz packs files (slash-separated path to content) into a gzip
// tarball, in sorted order.
func TarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
