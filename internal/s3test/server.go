// Package s3test serves buckets from a loopback S3-compatible endpoint
// for tests: the read side of the S3 API minio-go uses to fetch a Flux
// Bucket (GetBucketLocation, HeadBucket, ListObjectsV2, GetObject), with
// AWS Signature V4 checked when the server has keys.
package s3test

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Server is an S3-compatible endpoint on a loopback address.
type Server struct {
	*httptest.Server
	mu      sync.Mutex
	buckets map[string]map[string][]byte
	// keys are the access keys with their secret keys; none: anonymous
	// requests are served.
	keys map[string]string
	// Requests counts the requests served.
	Requests atomic.Int64
}

// NewServer starts an endpoint, closed when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{buckets: map[string]map[string][]byte{}, keys: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Endpoint is the server as a Bucket's spec.endpoint (host:port).
func (s *Server) Endpoint() string { return strings.TrimPrefix(s.URL, "http://") }

// AddKey makes the server require Signature V4 requests signed with one
// of its keys.
func (s *Server) AddKey(accessKey, secretKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[accessKey] = secretKey
}

// Put stores objects, key to content, in bucket, creating it.
func (s *Server) Put(bucket string, objects map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucket]
	if b == nil {
		b = map[string][]byte{}
		s.buckets[bucket] = b
	}
	for k, v := range objects {
		b[k] = []byte(v)
	}
}

func etag(data []byte) string {
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.authorize(r); code != "" {
		s.fail(w, r, http.StatusForbidden, code)
		return
	}
	bucketName, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	if q.Has("location") {
		writeXML(w, struct {
			XMLName xml.Name `xml:"LocationConstraint"`
			Value   string   `xml:",chardata"`
		}{Value: "us-east-1"})
		return
	}
	b, ok := s.buckets[bucketName]
	if !ok {
		s.fail(w, r, http.StatusNotFound, "NoSuchBucket")
		return
	}
	switch {
	case key == "" && r.Method == http.MethodHead:
		w.WriteHeader(http.StatusOK)
	case key == "" && q.Get("list-type") == "2":
		s.list(w, bucketName, b, q.Get("prefix"))
	case key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		data, ok := b[key]
		if !ok {
			s.fail(w, r, http.StatusNotFound, "NoSuchKey")
			return
		}
		if m := r.Header.Get("If-Match"); m != "" && strings.Trim(m, `"`) != strings.Trim(etag(data), `"`) {
			s.fail(w, r, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		w.Header().Set("ETag", etag(data))
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
		if r.Method == http.MethodGet {
			_, _ = w.Write(data)
		}
	default:
		s.fail(w, r, http.StatusNotImplemented, "NotImplemented")
	}
}

func (s *Server) list(w http.ResponseWriter, bucket string, b map[string][]byte, prefix string) {
	type content struct {
		Key          string
		ETag         string
		Size         int
		LastModified string
	}
	res := struct {
		XMLName  xml.Name `xml:"ListBucketResult"`
		Name     string
		Prefix   string
		KeyCount int
		MaxKeys  int
		Contents []content
	}{Name: bucket, Prefix: prefix, MaxKeys: 1000}
	var keys []string
	for k := range b {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Contents = append(res.Contents, content{Key: k, ETag: etag(b[k]), Size: len(b[k]), LastModified: "1970-01-01T00:00:00.000Z"})
	}
	res.KeyCount = len(res.Contents)
	writeXML(w, res)
}

func writeXML(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/xml")
	_ = xml.NewEncoder(w).Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = xml.NewEncoder(w).Encode(struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string
		Message  string
		Resource string
	}{Code: code, Message: code, Resource: r.URL.Path})
}

// authorize checks r's Signature V4 against the server's keys; it
// returns the S3 error code refusing it, "" to serve it.
func (s *Server) authorize(r *http.Request) string {
	if len(s.keys) == 0 {
		return ""
	}
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "AccessDenied"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 {
		return "AccessDenied"
	}
	secret, ok := s.keys[scope[0]]
	if !ok {
		return "InvalidAccessKeyId"
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	var headers strings.Builder
	for _, h := range signed {
		v := strings.Join(r.Header.Values(h), ",")
		if h == "host" {
			v = r.Host
		}
		headers.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	canonical := strings.Join([]string{
		r.Method,
		s3utils.EncodePath(r.URL.Path),
		strings.ReplaceAll(r.URL.Query().Encode(), "+", "%20"),
		headers.String(),
		fields["SignedHeaders"],
		r.Header.Get("X-Amz-Content-Sha256"),
	}, "\n")
	sum := sha256.Sum256([]byte(canonical))
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", r.Header.Get("X-Amz-Date"), strings.Join(scope[1:], "/"), hex.EncodeToString(sum[:])}, "\n")
	key := []byte("AWS4" + secret)
	for _, part := range scope[1:] {
		key = hmacSHA256(key, part)
	}
	if hex.EncodeToString(hmacSHA256(key, toSign)) != fields["Signature"] {
		return "SignatureDoesNotMatch"
	}
	return ""
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
