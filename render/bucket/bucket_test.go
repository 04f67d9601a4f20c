package bucket

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/truce-dev/truce/internal/s3test"
	"github.com/truce-dev/truce/render"
)

func TestFetch(t *testing.T) {
	const secret = "s3cr3t-value"
	objects := map[string]string{
		"apps/a.yaml":            "a",
		"apps/b.yaml":            "b",
		"apps/notes.txt":         "notes",
		"apps/sub/":              "",
		"base/c.yaml":            "c",
		"base/skip/d.yaml":       "d",
		".sourceignore":          "base/skip/\n*.txt\n",
		"apps/tmp/keep.yaml":     "keep",
		"apps/tmp/drop.yaml.bak": "drop",
	}
	open := s3test.NewServer(t)
	open.Put("fleet", objects)
	locked := s3test.NewServer(t)
	locked.AddKey("truce", secret)
	locked.Put("fleet", map[string]string{"x.yaml": "x"})
	closed := closedEndpoint(t)
	str := func(s string) *string { return &s }
	right := &Credentials{AccessKey: "truce", SecretKey: secret, From: "Secret flux-system/s3"}

	tests := []struct {
		name     string
		endpoint string
		spec     func(*Spec)
		creds    *Credentials
		// prefetch fetches online first.
		prefetch, offline bool
		want              map[string]string
		err               string
		unpredictable     bool
	}{
		{name: "everything but .sourceignore's", endpoint: open.Endpoint(), want: map[string]string{
			"apps/a.yaml": "a", "apps/b.yaml": "b", "base/c.yaml": "c", "apps/tmp/keep.yaml": "keep", "apps/tmp/drop.yaml.bak": "drop"}},
		{name: "prefix keeps full keys", endpoint: open.Endpoint(), spec: func(s *Spec) { s.Prefix = "apps/" },
			want: map[string]string{"apps/a.yaml": "a", "apps/b.yaml": "b", "apps/tmp/keep.yaml": "keep", "apps/tmp/drop.yaml.bak": "drop"}},
		{name: "spec.ignore after .sourceignore", endpoint: open.Endpoint(), spec: func(s *Spec) { s.Ignore = str("*.bak\n!notes.txt\nbase/\n") },
			want: map[string]string{"apps/a.yaml": "a", "apps/b.yaml": "b", "apps/notes.txt": "notes", "apps/tmp/keep.yaml": "keep"}},
		{name: "https to an http endpoint", endpoint: open.Endpoint(), spec: func(s *Spec) { s.Insecure = false },
			err: "endpoint " + open.Endpoint(), unpredictable: true},
		{name: "right credentials", endpoint: locked.Endpoint(), creds: right, want: map[string]string{"x.yaml": "x"}},
		{name: "wrong secret key", endpoint: locked.Endpoint(), creds: &Credentials{AccessKey: "truce", SecretKey: "wrong-" + secret, From: "--bucket-secret /etc/s3"},
			err: "refused access with the credentials of --bucket-secret /etc/s3: SignatureDoesNotMatch", unpredictable: true},
		{name: "wrong access key", endpoint: locked.Endpoint(), creds: &Credentials{AccessKey: "nobody", SecretKey: secret, From: "Secret flux-system/s3"},
			err: "refused access with the credentials of Secret flux-system/s3: InvalidAccessKeyId", unpredictable: true},
		{name: "anonymous where keys are needed", endpoint: locked.Endpoint(), err: "refused access anonymously", unpredictable: true},
		{name: "missing bucket", endpoint: open.Endpoint(), spec: func(s *Spec) { s.BucketName = "gone" }, err: "bucket 'gone' not found"},
		{name: "unreachable endpoint", endpoint: closed, err: "endpoint " + closed + ", bucket fleet): the endpoint cannot be reached", unpredictable: true},
		{name: "offline without a fetch", endpoint: closed, offline: true,
			err: "Bucket flux-system/b (endpoint " + closed + ", bucket fleet): not in the cache", unpredictable: true},
		{name: "offline after a fetch", endpoint: open.Endpoint(), spec: func(s *Spec) { s.Prefix = "base/" }, prefetch: true, offline: true,
			want: map[string]string{"base/c.yaml": "c"}},
		{name: "gcp", endpoint: open.Endpoint(), spec: func(s *Spec) { s.Provider = "gcp" }, err: "not gcp", unpredictable: true},
		{name: "azure", endpoint: open.Endpoint(), spec: func(s *Spec) { s.Provider = "azure" }, err: "not azure", unpredictable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &Bucket{Namespace: "flux-system", Name: "b", Spec: Spec{BucketName: "fleet", Endpoint: tc.endpoint, Insecure: true}}
			if tc.spec != nil {
				tc.spec(&b.Spec)
			}
			f := &Fetcher{CacheDir: t.TempDir()}
			if tc.prefetch {
				if _, err := f.Fetch(t.Context(), b, tc.creds); err != nil {
					t.Fatal(err)
				}
			}
			f.Offline = tc.offline
			before := open.Requests.Load()
			a, err := f.Fetch(t.Context(), b, tc.creds)
			if tc.offline && open.Requests.Load() != before {
				t.Errorf("offline, the endpoint was asked")
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				if _, ok := render.AsUnpredictable(err); ok != tc.unpredictable {
					t.Errorf("error %v: Unpredictable %v, want %v", err, ok, tc.unpredictable)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %v shows the secret key", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := files(t, a.Dir); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("fetched %v, want %v", got, tc.want)
			}
			if !strings.HasPrefix(a.Revision, "sha256:") || a.URL != "http://"+tc.endpoint+"/"+b.Spec.BucketName {
				t.Errorf("artifact %s@%s", a.URL, a.Revision)
			}
		})
	}
}

// A changed object is a new revision; the older fetch is removed.
func TestFetchRevisions(t *testing.T) {
	s := s3test.NewServer(t)
	s.Put("fleet", map[string]string{"a.yaml": "1"})
	b := &Bucket{Namespace: "ns", Name: "b", Spec: Spec{BucketName: "fleet", Endpoint: s.Endpoint(), Insecure: true}}
	f := &Fetcher{CacheDir: t.TempDir()}
	first, err := f.Fetch(t.Context(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.Fetch(t.Context(), b, nil)
	if err != nil || again.Revision != first.Revision || again.Dir != first.Dir {
		t.Fatalf("same content fetched as %+v, %v; first %+v", again, err, first)
	}
	s.Put("fleet", map[string]string{"a.yaml": "2"})
	second, err := f.Fetch(t.Context(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Revision == first.Revision {
		t.Fatalf("revision %s unchanged after a change", second.Revision)
	}
	if got := files(t, second.Dir); got["a.yaml"] != "2" {
		t.Errorf("fetched %v", got)
	}
	if _, err := os.Stat(first.Dir); !os.IsNotExist(err) {
		t.Errorf("the older fetch %s is kept: %v", first.Dir, err)
	}
}

// Limits stop a bucket too large to read.
func TestFetchLimits(t *testing.T) {
	s := s3test.NewServer(t)
	s.Put("fleet", map[string]string{"a.yaml": strings.Repeat("a", 100), "b.yaml": strings.Repeat("b", 100)})
	b := &Bucket{Namespace: "ns", Name: "b", Spec: Spec{BucketName: "fleet", Endpoint: s.Endpoint(), Insecure: true}}
	for _, tc := range []struct {
		f    Fetcher
		want string
	}{
		{Fetcher{MaxFileBytes: 50}, "object a.yaml has 100 bytes"},
		{Fetcher{MaxTotalBytes: 150}, "the objects hold 200 bytes"},
	} {
		tc.f.CacheDir = t.TempDir()
		_, err := tc.f.Fetch(t.Context(), b, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one with %q", err, tc.want)
		}
	}
}

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// closedEndpoint is a loopback address nothing listens on.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
