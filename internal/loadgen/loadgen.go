// Package loadgen measures an admission webhook the way kube-apiserver
// calls it: AdmissionReview POSTs over TLS on loopback, at a fixed
// concurrency, for a bounded number of requests, each answer checked as
// kube-apiserver checks it. The same package provides the floor to compare
// with (NoopHandler, a webhook that allows everything), the TLS set-up both
// targets are served with (Serve), a corpus of realistic requests
// (Requests) and the policies they are judged by (Policies).
package loadgen

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	webhookrequest "k8s.io/apiserver/pkg/admission/plugin/webhook/request"
)

// UIDPlaceholder is the request uid of every corpus body; Run replaces it
// with a fresh uid per request, as kube-apiserver sends a new uid with
// every call and checks that the answer carries it back.
const UIDPlaceholder = "00000000-0000-4000-8000-0000deadbeef"

// maxErrorMessages is how many error messages a Result keeps: enough to
// see whether failures differ, few enough to print.
const maxErrorMessages = 5

// maxResponseBytes bounds how much of an answer is read. Answers are small
// (a patch at most); a larger one is a broken webhook, not a slow one.
const maxResponseBytes = 16 << 20

// Request is one AdmissionReview a load run sends.
type Request struct {
	// Name says what the request is, in error messages
	// ("validate CREATE Deployment team-a/checkout").
	Name string
	// Path is the request URI's path (and query) on the target.
	Path string
	// Body is the AdmissionReview as JSON, with UIDPlaceholder as
	// request.uid, exactly once.
	Body []byte
	// Mutating says the body goes to a mutating webhook: only a mutating
	// webhook may answer with a patch, and its patch must apply to the
	// request's object.
	Mutating bool
	// ExpectAllowed is the answer the corpus's policies give; nil when the
	// request does not say. It is checked only when Config.CheckAllowed.
	ExpectAllowed *bool
}

// Config is one load run against one target.
type Config struct {
	// Client calls the target; see Serve.
	Client *http.Client
	// URL is the target's base URL (https://127.0.0.1:PORT); it must be a
	// loopback address.
	URL string
	// Bodies are the requests to send, in turn: request i sends
	// Bodies[i % len(Bodies)].
	Bodies []Request
	// Concurrency is the number of requests in flight at any time.
	Concurrency int
	// Requests is the number of measured requests.
	Requests int
	// Warmup requests are sent first, at the same concurrency, and checked
	// but not measured: the target's and the client's first requests pay
	// for connection set-up and lazy initialisation.
	Warmup int
	// CheckAllowed checks each answer's allowed against the body's
	// ExpectAllowed. The floor allows everything, so it is run without.
	CheckAllowed bool
}

// Result is the outcome of a load run. Latency is the time from sending a
// request to having read its whole answer; checking the answer is not
// included.
type Result struct {
	// Requests is the number of measured requests.
	Requests int
	// Errors counts requests, warm-up included, whose answer
	// kube-apiserver would not accept or that differ from the expected
	// allowed: any error makes the run's numbers meaningless.
	Errors int
	// ErrorMessages are the first few errors.
	ErrorMessages []string
	// Allowed, Denied and Patched count the measured answers.
	Allowed, Denied, Patched int
	// Protocol is the protocol of the first answer ("HTTP/2.0 over TLS 1.3").
	Protocol string
	// Duration is the wall time of the measured requests.
	Duration time.Duration
	// Throughput is Requests per second of Duration.
	Throughput float64
	// Latency percentiles (nearest rank) and maximum of the measured
	// requests.
	P50, P90, P99, Max time.Duration
}

// Run sends cfg.Warmup and then cfg.Requests requests to the target and
// measures the latter. It returns an error when the run cannot be made
// (bad configuration, a URL off loopback, ctx done); failed requests are
// counted in the Result instead.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Client == nil {
		return nil, errors.New("load run: no HTTP client")
	}
	base, err := loopbackURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Concurrency < 1 {
		return nil, fmt.Errorf("load run: concurrency must be at least 1, not %d", cfg.Concurrency)
	}
	if cfg.Requests < 1 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("load run: want at least 1 request and no negative warm-up, got %d and %d", cfg.Requests, cfg.Warmup)
	}
	bodies, err := prepare(base, cfg.Bodies)
	if err != nil {
		return nil, err
	}
	prefix, err := uidPrefix()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, bodies: bodies, uidPrefix: prefix}

	if cfg.Warmup > 0 {
		// The first request goes alone: over HTTP/2 every worker would
		// otherwise dial its own connection, and all but one would be
		// thrown away, some mid-handshake.
		r.phase(ctx, 0, 1, false, 1)
		r.phase(ctx, 1, cfg.Warmup-1, false, cfg.Concurrency)
	}
	start := time.Now()
	latencies := r.phase(ctx, cfg.Warmup, cfg.Requests, true, cfg.Concurrency)
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load run stopped: %w", err)
	}

	res := &Result{
		Requests:      cfg.Requests,
		Errors:        int(r.errors.Load()),
		ErrorMessages: r.messages,
		Allowed:       int(r.allowed.Load()),
		Denied:        int(r.denied.Load()),
		Patched:       int(r.patched.Load()),
		Duration:      elapsed,
		Throughput:    float64(cfg.Requests) / elapsed.Seconds(),
	}
	if p := r.protocol.Load(); p != nil {
		res.Protocol = *p
	}
	slices.Sort(latencies)
	res.P50 = percentile(latencies, 50)
	res.P90 = percentile(latencies, 90)
	res.P99 = percentile(latencies, 99)
	res.Max = percentile(latencies, 100)
	return res, nil
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It is exact, and a value that was measured.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// loopbackURL parses a target URL and refuses any host but loopback: the
// load generator is a benchmark, and pointing it at a real server would be
// a denial-of-service attack.
func loopbackURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("load run: target URL: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("load run: target URL %q: scheme must be https or http", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return u, nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return u, nil
	}
	return nil, fmt.Errorf("load run: target URL %q is not on loopback: the load generator only calls 127.0.0.1, ::1 or localhost", raw)
}

// body is a Request split around its uid placeholder, with its URL and,
// for a mutating request, its object (to apply patches to).
type body struct {
	req           Request
	url           string
	before, after []byte
	object        []byte
}

func prepare(base *url.URL, reqs []Request) ([]body, error) {
	if len(reqs) == 0 {
		return nil, errors.New("load run: no request bodies")
	}
	out := make([]body, len(reqs))
	for i, r := range reqs {
		if n := bytes.Count(r.Body, []byte(UIDPlaceholder)); n != 1 {
			return nil, fmt.Errorf("load run: request %d (%s): the body holds the uid placeholder %d times, want once", i, r.Name, n)
		}
		ref, err := url.Parse(r.Path)
		if err != nil {
			return nil, fmt.Errorf("load run: request %d (%s): path: %w", i, r.Name, err)
		}
		at := bytes.Index(r.Body, []byte(UIDPlaceholder))
		b := body{
			req:    r,
			url:    base.ResolveReference(ref).String(),
			before: r.Body[:at],
			after:  r.Body[at+len(UIDPlaceholder):],
		}
		if r.Mutating {
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(r.Body, &review); err != nil || review.Request == nil {
				return nil, fmt.Errorf("load run: request %d (%s): not an AdmissionReview request: %v", i, r.Name, err)
			}
			b.object = review.Request.Object.Raw
		}
		out[i] = b
	}
	return out, nil
}

// uidPrefix makes the uids of one run differ from another's, so that a
// target cannot answer from a cache keyed by uid.
func uidPrefix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("load run: generating uids: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

type runner struct {
	cfg       Config
	bodies    []body
	uidPrefix string

	errors, allowed, denied, patched atomic.Int64
	protocol                         atomic.Pointer[string]

	mu       sync.Mutex
	messages []string
}

// phase sends requests first..first+n-1 from concurrency workers and
// returns their latencies when measure is set.
func (r *runner) phase(ctx context.Context, first, n int, measure bool, concurrency int) []time.Duration {
	var next atomic.Int64
	perWorker := make([][]time.Duration, concurrency)
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Go(func() {
			var lat []time.Duration
			if measure {
				lat = make([]time.Duration, 0, n/concurrency+1)
			}
			var buf bytes.Buffer
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					break
				}
				d, err := r.one(ctx, first+i, &buf, measure)
				if ctx.Err() != nil {
					break // a request cut short by cancellation is no error
				}
				if err != nil {
					r.fail(err)
				}
				if measure {
					lat = append(lat, d)
				}
			}
			perWorker[w] = lat
		})
	}
	wg.Wait()
	var all []time.Duration
	if measure {
		all = make([]time.Duration, 0, n)
		for _, l := range perWorker {
			all = append(all, l...)
		}
	}
	return all
}

func (r *runner) fail(err error) {
	r.errors.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.messages) < maxErrorMessages {
		r.messages = append(r.messages, err.Error())
	}
}

// one sends request i and checks its answer; it returns the latency.
func (r *runner) one(ctx context.Context, i int, buf *bytes.Buffer, count bool) (time.Duration, error) {
	b := &r.bodies[i%len(r.bodies)]
	uid := fmt.Sprintf("%s-0000-4000-8000-%012x", r.uidPrefix, i)
	// A fresh slice per request: the transport may still read a request
	// body after the answer has arrived, so a reused buffer could be
	// overwritten under it.
	payload := make([]byte, 0, len(b.before)+len(uid)+len(b.after))
	payload = append(append(append(payload, b.before...), uid...), b.after...)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(payload))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", b.req.Name, err)
	}
	// The headers kube-apiserver's webhook client sends.
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", "kube-apiserver-admission")

	buf.Reset()
	start := time.Now()
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return time.Since(start), fmt.Errorf("%s: %w", b.req.Name, err)
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes+1))
	resp.Body.Close()
	elapsed := time.Since(start)
	if err != nil {
		return elapsed, fmt.Errorf("%s: reading the answer: %w", b.req.Name, err)
	}
	if r.protocol.Load() == nil {
		p := resp.Proto
		if resp.TLS != nil {
			p += " over " + tls.VersionName(resp.TLS.Version)
		}
		r.protocol.CompareAndSwap(nil, &p)
	}
	return elapsed, r.check(b, types.UID(uid), resp.StatusCode, buf.Bytes(), count)
}

// check judges an answer as kube-apiserver's webhook dispatchers do (HTTP
// status, AdmissionReview, uid, patch rules, a patch that applies), and
// against the expected allowed.
func (r *runner) check(b *body, uid types.UID, status int, answer []byte, count bool) error {
	if status != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", b.req.Name, status, truncate(answer, 200))
	}
	if len(answer) > maxResponseBytes {
		return fmt.Errorf("%s: the answer is larger than %d bytes", b.req.Name, maxResponseBytes)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &review); err != nil {
		return fmt.Errorf("%s: the answer is not an AdmissionReview: %w", b.req.Name, err)
	}
	resp, err := webhookrequest.VerifyAdmissionResponse(uid, b.req.Mutating, &review)
	if err != nil {
		return fmt.Errorf("%s: %w", b.req.Name, err)
	}
	if len(resp.Patch) > 0 {
		if resp.PatchType != admissionv1.PatchTypeJSONPatch {
			return fmt.Errorf("%s: unsupported patch type %q", b.req.Name, resp.PatchType)
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			return fmt.Errorf("%s: the patch does not decode: %w", b.req.Name, err)
		}
		if _, err := patch.Apply(b.object); err != nil {
			return fmt.Errorf("%s: the patch does not apply to the object: %w", b.req.Name, err)
		}
	}
	if r.cfg.CheckAllowed && b.req.ExpectAllowed != nil && resp.Allowed != *b.req.ExpectAllowed {
		msg := ""
		if resp.Result != nil {
			msg = ": " + resp.Result.Message
		}
		return fmt.Errorf("%s: allowed is %t, want %t%s", b.req.Name, resp.Allowed, *b.req.ExpectAllowed, msg)
	}
	if count {
		if resp.Allowed {
			r.allowed.Add(1)
		} else {
			r.denied.Add(1)
		}
		if len(resp.Patch) > 0 {
			r.patched.Add(1)
		}
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
