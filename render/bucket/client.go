package bucket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
	"golang.org/x/sync/errgroup"
)

const (
	// maxObjects bounds how many objects one bucket may hold.
	maxObjects = 100_000
	// parallel bounds concurrent downloads.
	parallel = 8
	// maxRetries bounds minio-go's retries, so an endpoint that cannot be
	// reached is reported in seconds.
	maxRetries = 2
)

// errNoBucket is source-controller's failure for a bucket the endpoint
// does not have.
var errNoBucket = errors.New("not found")

// limitError is a bucket over truce's limits.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// client is a minio-go client set up as source-controller sets it up
// for a Bucket: the endpoint's region, https unless insecure, static
// credentials or none.
type client struct{ *minio.Client }

func newClient(b *Bucket, creds *Credentials) (*client, error) {
	opts := &minio.Options{
		Region:     b.Spec.Region,
		Secure:     !b.Spec.Insecure,
		Creds:      credentials.NewStaticV4("", "", ""),
		MaxRetries: maxRetries,
	}
	if creds != nil {
		opts.Creds = credentials.NewStaticV4(creds.AccessKey, creds.SecretKey, "")
	}
	c, err := minio.New(b.Spec.Endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("spec.endpoint: %w", err)
	}
	return &client{c}, nil
}

// object is one object to fetch.
type object struct {
	key, etag string
	size      int64
}

// index is the objects of a bucket to fetch, sorted by key.
type index []object

// revision is source-controller's revision of the objects: sha256 over
// "key etag" lines in key order.
func (idx index) revision() string {
	h := sha256.New()
	for _, o := range idx {
		fmt.Fprintf(h, "%s %s\n", o.key, o.etag)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// bound checks the objects' listed sizes against the limits.
func (idx index) bound(maxFile, maxTotal int64) error {
	var total int64
	for _, o := range idx {
		if maxFile > 0 && o.size > maxFile {
			return &limitError{fmt.Sprintf("object %s has %d bytes, more than the %d bytes allowed for one file", o.key, o.size, maxFile)}
		}
		total += o.size
	}
	if maxTotal > 0 && total > maxTotal {
		return &limitError{fmt.Sprintf("the objects hold %d bytes, more than the %d bytes allowed", total, maxTotal)}
	}
	return nil
}

// index lists the objects source-controller fetches: those under
// spec.prefix that neither the bucket's .sourceignore nor spec.ignore
// excludes. Buckets have no default exclusions.
func (c *client) index(ctx context.Context, b *Bucket) (index, error) {
	name := b.Spec.BucketName
	exists, err := c.BucketExists(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("confirming the existence of bucket '%s': %w", name, err)
	}
	if !exists {
		return nil, fmt.Errorf("bucket '%s' %w", name, errNoBucket)
	}
	patterns, err := c.ignoreFile(ctx, name)
	if err != nil {
		return nil, err
	}
	if b.Spec.Ignore != nil {
		// In-spec patterns come last and so take precedence.
		patterns = append(patterns, sourceignore.ReadPatterns(strings.NewReader(*b.Spec.Ignore), nil)...)
	}
	matcher := sourceignore.NewMatcher(patterns)
	var idx index
	for o := range c.ListObjectsIter(ctx, name, minio.ListObjectsOptions{
		Recursive: true,
		Prefix:    b.Spec.Prefix,
		UseV1:     s3utils.IsGoogleEndpoint(*c.EndpointURL()),
	}) {
		if o.Err != nil {
			return nil, fmt.Errorf("listing the objects of bucket '%s': %w", name, o.Err)
		}
		if strings.HasSuffix(o.Key, "/") || o.Key == sourceignore.IgnoreFile {
			continue
		}
		if matcher.Match(strings.Split(o.Key, "/"), false) {
			continue
		}
		if len(idx) == maxObjects {
			return nil, &limitError{fmt.Sprintf("bucket '%s' holds more than %d objects", name, maxObjects)}
		}
		idx = append(idx, object{key: o.Key, etag: o.ETag, size: o.Size})
	}
	slices.SortFunc(idx, func(a, b object) int { return strings.Compare(a.key, b.key) })
	return idx, nil
}

// maxIgnoreFile bounds the bucket's .sourceignore.
const maxIgnoreFile = 1 << 20

// ignoreFile reads the patterns of the .sourceignore at the bucket's
// root, none when there is none.
func (c *client) ignoreFile(ctx context.Context, name string) ([]gitignore.Pattern, error) {
	obj, err := c.GetObject(ctx, name, sourceignore.IgnoreFile, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s of bucket '%s': %w", sourceignore.IgnoreFile, name, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, maxIgnoreFile+1))
	if s3Error(err).Code == minio.NoSuchKey {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s of bucket '%s': %w", sourceignore.IgnoreFile, name, err)
	}
	if len(data) > maxIgnoreFile {
		return nil, &limitError{fmt.Sprintf("%s of bucket '%s' is larger than %d bytes", sourceignore.IgnoreFile, name, maxIgnoreFile)}
	}
	return sourceignore.ReadPatterns(strings.NewReader(string(data)), nil), nil
}

// download writes the objects of idx under dir at their keys, each as
// the etag it was listed with.
func (c *client) download(ctx context.Context, b *Bucket, idx index, dir string, maxFile int64) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, o := range idx {
		g.Go(func() error { return c.get(ctx, b.Spec.BucketName, o, dir, maxFile) })
	}
	return g.Wait()
}

func (c *client) get(ctx context.Context, bucket string, o object, dir string, maxFile int64) error {
	// As source-controller: a key leaving the directory is kept inside.
	p, err := securejoin.SecureJoin(dir, o.key)
	if err != nil {
		return fmt.Errorf("object %s: %w", o.key, err)
	}
	opts := minio.GetObjectOptions{}
	if o.etag != "" {
		if err := opts.SetMatchETag(o.etag); err != nil {
			return fmt.Errorf("object %s: %w", o.key, err)
		}
	}
	obj, err := c.GetObject(ctx, bucket, o.key, opts)
	if err != nil {
		return fmt.Errorf("getting object %s: %w", o.key, err)
	}
	defer obj.Close()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("object %s: %w", o.key, err)
	}
	out, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("object %s: %w", o.key, err)
	}
	limit := maxFile
	if limit <= 0 {
		limit = o.size
	}
	n, err := io.Copy(out, io.LimitReader(obj, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("getting object %s: %w", o.key, err)
	}
	if n > limit {
		return &limitError{fmt.Sprintf("object %s is larger than %d bytes", o.key, limit)}
	}
	return nil
}
