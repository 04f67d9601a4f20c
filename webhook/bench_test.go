package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/truce-dev/truce/internal/loadgen"
)

// BenchmarkReview measures one review of the load generator's corpus
// against its 20 policies, in process (no TLS, no network): the cost of the
// engine alone.
func BenchmarkReview(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	if err := loadgen.Policies(dir); err != nil {
		b.Fatal(err)
	}
	reqs, err := loadgen.Requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	h, err := NewHandler(ctx, Options{PolicyPaths: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	bodies := make([][]byte, len(reqs))
	for i, r := range reqs {
		bodies[i] = bytes.Replace(r.Body, []byte(loadgen.UIDPlaceholder), []byte("00000000-0000-4000-8000-000000000000"), 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := reqs[i%len(reqs)]
		rec := httptest.NewRecorder()
		path, _, _ := strings.Cut(r.Path, "?")
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(bodies[i%len(reqs)])))
		if rec.Code != 200 {
			b.Fatalf("%s: HTTP %d %s", r.Name, rec.Code, rec.Body)
		}
	}
}
