package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/truce-dev/truce/render"
)

// errOffline is what a refused network access fails with inside Helm; the
// session remembers the URL so the caller can name what needed it.
var errOffline = errors.New("needs the network (--offline)")

// errDownloadLimit is what a connection fails with once a session has read
// more than its download budget.
var errDownloadLimit = errors.New("download limit exceeded")

// session carries one Pull, dependency build or values fetch: every
// connection it opens is closed when ctx ends, counted against one download
// budget, and refused when offline. Helm's getters and registry client take
// neither a context nor a size limit, so both are enforced here, below them.
type session struct {
	ctx     context.Context
	offline bool
	limit   int64
	left    atomic.Int64

	transport *http.Transport
	registry  *registry.Client
	blobs     *diskCache

	mu       sync.Mutex
	refused  []string // URLs not fetched because offline
	overflow bool     // the download budget was exceeded
	dialErr  error    // the first connection that could not be opened
	// deniedBy is the registry host whose last answer refused access
	// (401, 403), "" when its last answer did not.
	deniedBy string
}

func (p *Puller) newSession(ctx context.Context) (*session, error) {
	s := &session{ctx: ctx, offline: p.Offline, limit: p.maxDownloadBytes(), blobs: p.cache().blobs()}
	s.left.Store(s.limit)
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	s.transport = &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DisableCompression:  true, // as Helm's getters: the budget counts what is stored
		TLSHandshakeTimeout: 30 * time.Second,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return s.dial(dialer, network, addr)
		},
	}
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(&http.Client{Transport: &guardedRoundTripper{s: s, next: s.transport}}),
		registry.ClientOptWriter(io.Discard),
	}
	if p.PlainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	if p.RegistryConfig != "" {
		opts = append(opts, registry.ClientOptCredentialsFile(p.RegistryConfig))
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Helm registry client: %w", err)
	}
	s.registry = rc
	return s, nil
}

func (s *session) close() { s.transport.CloseIdleConnections() }

// dial opens a connection bound to the session: refused offline, closed
// when the session's context ends, and reading from the shared budget.
func (s *session) dial(d *net.Dialer, network, addr string) (net.Conn, error) {
	if s.offline {
		s.refuse("//" + addr)
		return nil, errOffline
	}
	c, err := d.DialContext(s.ctx, network, addr)
	if err != nil {
		s.mu.Lock()
		if s.dialErr == nil && s.ctx.Err() == nil {
			s.dialErr = err
		}
		s.mu.Unlock()
		return nil, err
	}
	cc := &budgetConn{Conn: c, s: s}
	cc.stop = context.AfterFunc(s.ctx, func() { c.Close() })
	return cc, nil
}

// refuse records a URL that was not fetched because the session is offline.
func (s *session) refuse(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = append(s.refused, u)
}

// refusedURLs returns the URLs refused so far.
func (s *session) refusedURLs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// explain turns an error from inside Helm into the session's own reason
// when the session caused it: a cancelled context, an exceeded budget.
// Helm wraps errors with %v in places, so the cause is kept here instead of
// being looked for in the chain.
func (s *session) explain(err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (%v)", ctxErr, err)
	}
	s.mu.Lock()
	overflow := s.overflow
	s.mu.Unlock()
	if overflow {
		return fmt.Errorf("downloads exceed the %s limit (Puller.MaxDownloadBytes): %w", formatBytes(s.limit), err)
	}
	return err
}

// denied is a *render.Unpredictable for subject when an OCI registry's
// last answer refused access: the cluster may hold credentials truce does
// not, so what it would serve is unknown. credentials says where the
// credentials came from; their values are never shown.
func (s *session) denied(subject, credentials string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deniedBy == "" || s.ctx.Err() != nil {
		return nil
	}
	return &render.Unpredictable{Subject: subject, Reason: fmt.Sprintf("registry %s refused access with the credentials of %s", s.deniedBy, credentials)}
}

// unreachable is a *render.Unpredictable for subject when the session
// failed because a server could not be reached at all (refused, unknown
// host, timed out): what it would have served is unknown, which is not
// the same as a chart or version that does not exist.
func (s *session) unreachable(subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialErr == nil || s.ctx.Err() != nil {
		return nil
	}
	return &render.Unpredictable{Subject: subject, Reason: "cannot be reached: " + s.dialErr.Error()}
}

// budgetConn charges what is read against the session's budget.
type budgetConn struct {
	net.Conn
	s    *session
	stop func() bool
}

func (c *budgetConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.s.left.Add(-int64(n)) < 0 {
		c.s.mu.Lock()
		c.s.overflow = true
		c.s.mu.Unlock()
		// Withhold the bytes: returned with the error, HTTP would still
		// finish a response it has all of.
		return 0, errDownloadLimit
	}
	return n, err
}

func (c *budgetConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// guardedRoundTripper refuses requests offline with their URL (the registry
// client's requests do not go through the session's getters) and binds
// them to the session's context.
type guardedRoundTripper struct {
	s    *session
	next http.RoundTripper
}

func (g *guardedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.s.offline {
		g.s.refuse(req.URL.String())
		return nil, errOffline
	}
	resp, err := g.next.RoundTrip(req.WithContext(g.s.ctx))
	if err == nil {
		// A 401 is also the first step of every token or basic auth
		// exchange: only the last answer tells a refusal.
		g.s.mu.Lock()
		g.s.deniedBy = ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			g.s.deniedBy = req.URL.Host
		}
		g.s.mu.Unlock()
	}
	return resp, err
}

// providers are the getters Helm's downloader uses in this session: HTTP(S)
// and OCI, with chart archives cached by URL so that a second build or pull
// does not download them again. Plugin getters (helm-s3 and the like) are
// not offered: Argo CD and Flux do not install Helm plugins by default.
func (s *session) providers() getter.Providers {
	return getter.Providers{
		{Schemes: []string{"http", "https"}, New: func(opts ...getter.Option) (getter.Getter, error) {
			g, err := getter.NewHTTPGetter(append(opts, getter.WithTransport(s.transport))...)
			if err != nil {
				return nil, err
			}
			return &cachingGetter{s: s, next: g}, nil
		}},
		{Schemes: []string{registry.OCIScheme}, New: func(opts ...getter.Option) (getter.Getter, error) {
			g, err := getter.NewOCIGetter(append(opts, getter.WithRegistryClient(s.registry))...)
			if err != nil {
				return nil, err
			}
			return &cachingGetter{s: s, next: g}, nil
		}},
	}
}

// uncachedProviders fetch through the session without the archive cache:
// for index files and remote values files, which change under one URL.
//
// t is the transport to use (the session's, or one with a repository's
// TLS settings).
func (s *session) uncachedProviders(t *http.Transport) getter.Providers {
	return getter.Providers{
		{Schemes: []string{"http", "https"}, New: func(opts ...getter.Option) (getter.Getter, error) {
			g, err := getter.NewHTTPGetter(append(opts, getter.WithTransport(t))...)
			if err != nil {
				return nil, err
			}
			return &offlineGetter{s: s, next: g}, nil
		}},
	}
}

// cachingGetter serves chart archives from the session's blob cache, keyed
// by the URL (an OCI reference includes its tag or digest), and stores what
// it downloads there.
type cachingGetter struct {
	s    *session
	next getter.Getter
}

func (g *cachingGetter) Get(href string, opts ...getter.Option) (*bytes.Buffer, error) {
	if data, ok := g.s.blobs.get(href); ok {
		return bytes.NewBuffer(data), nil
	}
	if g.s.offline {
		g.s.refuse(href)
		return nil, errOffline
	}
	buf, err := g.next.Get(href, opts...)
	if err != nil {
		return nil, g.s.explain(err)
	}
	if strings.HasSuffix(href, ".prov") {
		return buf, nil
	}
	if err := g.s.blobs.put(href, buf.Bytes()); err != nil {
		return nil, err
	}
	return buf, nil
}

// offlineGetter refuses offline with the URL and explains session errors.
type offlineGetter struct {
	s    *session
	next getter.Getter
}

func (g *offlineGetter) Get(href string, opts ...getter.Option) (*bytes.Buffer, error) {
	if g.s.offline {
		g.s.refuse(href)
		return nil, errOffline
	}
	buf, err := g.next.Get(href, opts...)
	return buf, g.s.explain(err)
}

// redactURL drops credentials from a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// formatBytes prints a byte count the way manifest's limits are printed.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
