// Package bucket fetches the objects of a Flux Bucket source as
// source-controller does for the generic and aws providers: with
// minio-go, the bucket's .sourceignore and spec.ignore applied to the
// listing of spec.prefix, each object written at its full key. Fetches
// are kept in the cache by bucket and content (the objects' etags), so an
// offline run reuses the last one.
package bucket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/truce-dev/truce/render"
)

// Providers of spec.provider.
const (
	ProviderGeneric = "generic"
	ProviderAWS     = "aws"
	ProviderGCP     = "gcp"
	ProviderAzure   = "azure"
)

// defaultTimeout is the Bucket CRD's default spec.timeout.
const defaultTimeout = 60 * time.Second

// Spec is a source.toolkit.fluxcd.io Bucket's spec, as far as fetching
// goes.
type Spec struct {
	Provider   string  `json:"provider"`
	BucketName string  `json:"bucketName"`
	Endpoint   string  `json:"endpoint"`
	Region     string  `json:"region"`
	Prefix     string  `json:"prefix"`
	Insecure   bool    `json:"insecure"`
	Ignore     *string `json:"ignore"`
	Timeout    string  `json:"timeout"`
	SecretRef  *struct {
		Name string `json:"name"`
	} `json:"secretRef"`
}

// Bucket is a Bucket object: its namespace and name, for messages, and
// its spec.
type Bucket struct {
	Namespace, Name string
	Spec            Spec
}

// Subject names the Bucket in messages: object, endpoint and bucket.
func (b *Bucket) Subject() string {
	return fmt.Sprintf("Bucket %s/%s (endpoint %s, bucket %s)", b.Namespace, b.Name, b.Spec.Endpoint, b.Spec.BucketName)
}

// URL is where the bucket is, as http(s)://endpoint/bucketName.
func (b *Bucket) URL() string {
	scheme := "https"
	if b.Spec.Insecure {
		scheme = "http"
	}
	return scheme + "://" + b.Spec.Endpoint + "/" + b.Spec.BucketName
}

func (b *Bucket) provider() string {
	if b.Spec.Provider == "" {
		return ProviderGeneric
	}
	return b.Spec.Provider
}

func (b *Bucket) timeout() (time.Duration, error) {
	if b.Spec.Timeout == "" {
		return defaultTimeout, nil
	}
	d, err := time.ParseDuration(b.Spec.Timeout)
	if err != nil {
		return 0, fmt.Errorf("%s: spec.timeout %q: %w", b.Subject(), b.Spec.Timeout, err)
	}
	return d, nil
}

// Credentials are the access and secret keys sent to the endpoint.
type Credentials struct {
	AccessKey, SecretKey string
	// From says where they were read (a Secret of the repository, the
	// --bucket-secret directory), never what they are.
	From string
}

// Fetcher fetches Buckets into its cache.
type Fetcher struct {
	// CacheDir holds fetched buckets under buckets/.
	CacheDir string
	// Offline forbids the network: the last fetch of the same bucket is
	// reused, else the Bucket is Unpredictable.
	Offline bool
	// MaxFileBytes and MaxTotalBytes bound one object and the whole
	// fetch.
	MaxFileBytes, MaxTotalBytes int64
}

// Artifact is a fetched bucket.
type Artifact struct {
	// Dir holds the objects at their keys. It is the cache's copy: read
	// it, do not write into it.
	Dir string
	// URL is the bucket's URL; Revision is source-controller's revision
	// for the content, sha256 of the objects' keys and etags.
	URL, Revision string
}

// Fetch fetches b's objects with creds (nil: anonymous).
func (f *Fetcher) Fetch(ctx context.Context, b *Bucket, creds *Credentials) (*Artifact, error) {
	switch p := b.provider(); p {
	case ProviderGeneric, ProviderAWS:
	default:
		return nil, &render.Unpredictable{Subject: b.Subject(), Reason: fmt.Sprintf("truce fetches buckets of the generic and aws providers, not %s", p)}
	}
	if b.Spec.BucketName == "" || b.Spec.Endpoint == "" {
		return nil, fmt.Errorf("%s: spec.bucketName and spec.endpoint are required", b.Subject())
	}
	c := f.cache(b)
	if f.Offline {
		if a, ok := c.latest(); ok {
			return a, nil
		}
		return nil, &render.Unpredictable{Subject: b.Subject(), Reason: "not in the cache, and fetching it needs the network (--offline)"}
	}
	timeout, err := b.timeout()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := newClient(b, creds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Subject(), err)
	}
	idx, err := cl.index(ctx, b)
	if err != nil {
		return nil, f.failed(ctx, b, creds, err)
	}
	if err := idx.bound(f.MaxFileBytes, f.MaxTotalBytes); err != nil {
		return nil, fmt.Errorf("%s: %w", b.Subject(), err)
	}
	a, err := c.store(idx, func(dir string) error { return cl.download(ctx, b, idx, dir, f.MaxFileBytes) })
	if err != nil {
		return nil, f.failed(ctx, b, creds, err)
	}
	return a, nil
}

// failed is what an error talking to the endpoint makes of the Bucket:
// the endpoint's answers and an unreachable endpoint make it
// Unpredictable (the cluster may reach it, or hold other credentials); a
// bucket that is not there fails it as source-controller fails it.
func (f *Fetcher) failed(ctx context.Context, b *Bucket, creds *Credentials, err error) error {
	if errors.Is(err, errNoBucket) {
		return fmt.Errorf("%s: %w", b.Subject(), err)
	}
	var limit *limitError
	if errors.As(err, &limit) {
		return fmt.Errorf("%s: %w", b.Subject(), err)
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	who := "anonymously"
	if creds != nil {
		who = "with the credentials of " + creds.From
	}
	resp := s3Error(err)
	var netErr net.Error
	switch {
	case resp.StatusCode == 401 || resp.StatusCode == 403 || isAuthCode(resp.Code):
		return &render.Unpredictable{Subject: b.Subject(), Reason: fmt.Sprintf("the endpoint refused access %s: %s", who, describe(err))}
	case resp.Code != "":
		return &render.Unpredictable{Subject: b.Subject(), Reason: fmt.Sprintf("fetching %s: %s", who, describe(err))}
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return &render.Unpredictable{Subject: b.Subject(), Reason: fmt.Sprintf("the endpoint cannot be reached: %v", err)}
	}
	return &render.Unpredictable{Subject: b.Subject(), Reason: fmt.Sprintf("cannot be fetched: %v", err)}
}

// isAuthCode says whether an S3 error code refuses the credentials.
func isAuthCode(code string) bool {
	switch code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
		return true
	}
	return false
}

// describe is an S3 error as code and message; other errors as they are.
// Neither holds the secret key: requests carry only its signature.
func describe(err error) string {
	resp := s3Error(err)
	if resp.Code == "" {
		return err.Error()
	}
	if resp.Message == "" || strings.Contains(resp.Message, resp.Code) {
		return fmt.Sprintf("%s (HTTP %d)", resp.Code, resp.StatusCode)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", resp.Code, resp.Message, resp.StatusCode)
}

// s3Error is the endpoint's answer in err's chain; zero when there is
// none.
func s3Error(err error) minio.ErrorResponse {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp
	}
	return minio.ErrorResponse{}
}
