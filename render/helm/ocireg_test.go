package helm

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
)

// ociRegistry is the read side of the OCI distribution API, enough for
// Helm's registry client to resolve tags and pull charts: distribution's
// registry is not in truce's module graph, so charts are pushed by writing
// their manifest, config and layer straight into it.
type ociRegistry struct {
	*httptest.Server
	mu        sync.Mutex
	blobs     map[string][]byte
	manifests map[string][]byte   // repository:reference
	tags      map[string][]string // repository -> tags
	requests  atomic.Int64
	// corrupt serves every chart layer altered, to prove digests are checked.
	corrupt atomic.Bool
}

func newOCIRegistry(t *testing.T) *ociRegistry {
	t.Helper()
	r := &ociRegistry{blobs: map[string][]byte{}, manifests: map[string][]byte{}, tags: map[string][]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// host is the registry as an oci:// URL host.
func (r *ociRegistry) host() string { return strings.TrimPrefix(r.URL, "http://") }

// push stores the web fixture at version as repository:version, the way
// helm push lays a chart out.
func (r *ociRegistry) push(t *testing.T, repository, version string) {
	t.Helper()
	ch, err := LoadArchiveOrDir(fixture(t, "charts/web"))
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version = version
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layer, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	config, err := json.Marshal(ch.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        r.blob(registry.ConfigMediaType, config),
		"layers":        []any{r.blob(registry.ChartLayerMediaType, layer)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifests[repository+":"+version] = manifest
	r.manifests[repository+":"+digest(manifest)] = manifest
	r.tags[repository] = append(r.tags[repository], version)
}

func (r *ociRegistry) blob(mediaType string, data []byte) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := digest(data)
	r.blobs[d] = data
	return map[string]any{"mediaType": mediaType, "digest": d, "size": len(data)}
}

func digest(data []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(data)) }

func (r *ociRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	switch {
	case req.URL.Path == "/v2/" || req.URL.Path == "/v2":
		w.WriteHeader(http.StatusOK)
	case strings.HasSuffix(p, "/tags/list"):
		repository := strings.TrimSuffix(p, "/tags/list")
		json.NewEncoder(w).Encode(map[string]any{"name": repository, "tags": r.tags[repository]})
	case strings.Contains(p, "/manifests/"):
		i := strings.LastIndex(p, "/manifests/")
		m, ok := r.manifests[p[:i]+":"+p[i+len("/manifests/"):]]
		if !ok {
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		r.write(w, req, "application/vnd.oci.image.manifest.v1+json", m, digest(m))
	case strings.Contains(p, "/blobs/"):
		d := p[strings.LastIndex(p, "/blobs/")+len("/blobs/"):]
		b, ok := r.blobs[d]
		if !ok {
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		if r.corrupt.Load() && len(b) > 100 {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 0xff
		}
		r.write(w, req, "application/octet-stream", b, d)
	default:
		http.NotFound(w, req)
	}
}

// write serves data under its digest d (which a corrupt blob does not match).
func (r *ociRegistry) write(w http.ResponseWriter, req *http.Request, mediaType string, data []byte, d string) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", d)
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	if req.Method == http.MethodHead {
		return
	}
	w.Write(data)
}

// registryConfig is an empty credentials file, so that tests do not read
// the user's registry logins.
func registryConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
