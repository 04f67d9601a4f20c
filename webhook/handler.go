// Package webhook serves MutatingAdmissionPolicies and
// ValidatingAdmissionPolicies as an admission webhook: AdmissionReview v1 at
// /mutate and /validate, answered by the same admission chain as
// `truce admit` (the upstream policy plugins of kube-apiserver 1.37.2).
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/truce-dev/truce/admission"
)

// Options configure a Handler.
type Options struct {
	// PolicyPaths are files or directories of policies, bindings and
	// params; ClusterPaths describe the cluster they run in (namespaces
	// with their labels, CRDs, params).
	PolicyPaths  []string
	ClusterPaths []string
	// RequestTimeout bounds the evaluation of one request; the answer to a
	// request that takes longer is an HTTP 504, so that the API server
	// applies the failurePolicy before its own timeoutSeconds. Default
	// 1.5 s, below the 2 s `truce webhook config` sets. A shorter
	// ?timeout= from the API server wins.
	RequestTimeout time.Duration
	// MaxRequestBytes bounds a request body. Default 6 MiB: two objects at
	// etcd's 1.5 MiB limit each, JSON-escaped, and the review around them.
	MaxRequestBytes int64
	// MaxInFlight bounds the requests read and evaluated at once; more
	// wait for a slot until their deadline and are then answered 429, so
	// that the API server applies the failurePolicy at once. It bounds
	// memory (each holds up to MaxRequestBytes) and keeps CEL from
	// queueing past every caller's timeout. An evaluation answered 504
	// keeps its slot until it actually ends. Default 64.
	MaxInFlight int
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Namespaces, when set, gives the labels of a live cluster's
	// namespaces (WatchNamespaces); see ensureNamespace.
	Namespaces Namespaces
}

const (
	defaultRequestTimeout  = 1500 * time.Millisecond
	defaultMaxRequestBytes = 6 << 20
	defaultMaxInFlight     = 64
)

// Handler answers AdmissionReviews at /mutate and /validate.
type Handler struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	// slots holds a token per request being served (MaxInFlight).
	slots chan struct{}

	current atomic.Pointer[policySet]
	// reloadMu serialises reloads; lastErr is the last load error (nil
	// when the set in force is the newest).
	reloadMu sync.Mutex
	lastErr  atomic.Pointer[string]
	// draining is set when shutdown begins: /readyz fails so that the
	// Service stops sending requests before the listener closes.
	draining atomic.Bool
}

// NewHandler loads and compiles the policies. It fails when they cannot be
// served; later reloads keep the previous set instead.
func NewHandler(ctx context.Context, opts Options) (*Handler, error) {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = defaultRequestTimeout
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = defaultMaxRequestBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = defaultMaxInFlight
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts, log: opts.Logger, metrics: newMetrics(), mux: http.NewServeMux(),
		slots: make(chan struct{}, opts.MaxInFlight)}
	h.mux.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) { h.serveReview(w, r, true) })
	h.mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) { h.serveReview(w, r, false) })
	if _, err := h.Reload(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// ServeHTTP serves /mutate and /validate.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close releases the compiled policies.
func (h *Handler) Close() {
	if set := h.current.Swap(nil); set != nil {
		set.retire()
	}
}

// Ready reports whether policies are in force, and the last load error.
func (h *Handler) Ready() (bool, error) {
	var err error
	if msg := h.lastErr.Load(); msg != nil {
		err = errors.New(*msg)
	}
	return h.current.Load() != nil, err
}

// Reload reads the policy files again and, when they changed and compile,
// puts them in force. A set that fails to load leaves the previous one in
// force; the error is returned, logged and counted. It reports whether a
// new set is in force.
func (h *Handler) Reload(ctx context.Context) (bool, error) {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	digest, err := digestPaths(append(append([]string{}, h.opts.PolicyPaths...), h.opts.ClusterPaths...))
	if err == nil {
		if cur := h.current.Load(); cur != nil && cur.digest == digest {
			return false, nil
		}
		var set *policySet
		if set, err = loadPolicies(ctx, h.opts.PolicyPaths, h.opts.ClusterPaths, digest); err == nil {
			old := h.current.Swap(set)
			h.lastErr.Store(nil)
			h.metrics.reloads.WithLabelValues("ok").Inc()
			h.metrics.lastReload.Set(0)
			h.metrics.policies.WithLabelValues("MutatingAdmissionPolicy").Set(float64(len(set.mutating)))
			h.metrics.policies.WithLabelValues("ValidatingAdmissionPolicy").Set(float64(len(set.validating)))
			h.log.Info("policies loaded", "mutating", set.mutating, "validating", set.validating, "digest", digest[:12])
			if old != nil {
				// Requests that took the old set finish with it.
				go old.retire()
			}
			return true, nil
		}
	}
	msg := err.Error()
	h.lastErr.Store(&msg)
	h.metrics.reloads.WithLabelValues("error").Inc()
	if h.current.Load() != nil {
		h.metrics.lastReload.Set(1)
		h.log.Error("policies not reloaded; the previous policies stay in force", "error", err)
	}
	return false, fmt.Errorf("loading policies: %w", err)
}

// Watch reloads the policies every interval until ctx ends. Polling the
// files' contents (not inotify) also sees a ConfigMap volume's atomic
// symlink swap and files on any filesystem.
func (h *Handler) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = h.Reload(ctx) // logged and counted by Reload
		}
	}
}

// Probes serves /healthz, /readyz and /metrics.
func (h *Handler) Probes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, err := h.Ready()
		if h.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "[-]shutdown: draining\n")
			return
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "[-]policies: not loaded\n")
			return
		}
		_, _ = io.WriteString(w, "[+]policies: in force\n")
		if err != nil {
			// Not unready: every replica reads the same files, and taking
			// them all out of the Service would turn a bad edit into an
			// outage of every write the webhooks match.
			_, _ = fmt.Fprintf(w, "[!]reload: the newest policy files failed to load, older ones in force: %v\n", err)
		}
	})
	mux.Handle("/metrics", promHandler(h.metrics))
	return mux
}

// serveReview answers one AdmissionReview.
func (h *Handler) serveReview(w http.ResponseWriter, r *http.Request, mutate bool) {
	start := time.Now()
	h.metrics.inflight.Inc()
	defer h.metrics.inflight.Dec()
	name := "validate"
	if mutate {
		name = "mutate"
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, name, start, "", http.StatusMethodNotAllowed, "method_not_allowed", "AdmissionReviews are POSTed")
		return
	}
	// The deadline runs from arrival: time spent waiting for a slot is
	// time the caller is waiting too.
	ctx, cancel := context.WithTimeout(r.Context(), h.deadline(r))
	defer cancel()
	// The slot is the evaluation's once it starts: an evaluation that
	// outlives its deadline keeps it until it ends, so the bound is on
	// work under way, not only on answers pending.
	handedOver := false
	select {
	case h.slots <- struct{}{}:
		defer func() {
			if !handedOver {
				<-h.slots
			}
		}()
	case <-ctx.Done():
		w.Header().Set("Retry-After", "1")
		h.fail(w, name, start, "", http.StatusTooManyRequests, "overloaded",
			fmt.Sprintf("%d requests in flight (--max-in-flight): none finished before the deadline", h.opts.MaxInFlight))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.fail(w, name, start, "", http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", h.opts.MaxRequestBytes))
			return
		}
		h.fail(w, name, start, "", http.StatusBadRequest, "read", "reading the request: "+err.Error())
		return
	}
	review, req, err := decodeReview(body)
	if err != nil {
		var re *reviewError
		if errors.As(err, &re) {
			h.fail(w, name, start, "", re.code, "bad_request", re.msg)
			return
		}
		h.fail(w, name, start, "", http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	set := h.acquire()
	if set == nil {
		h.fail(w, name, start, string(req.Operation), http.StatusServiceUnavailable, "not_ready", "no policies in force")
		return
	}
	handedOver = true
	res, err := h.evaluate(ctx, set, req, mutate, func() { <-h.slots })
	if err != nil {
		code, reason := http.StatusInternalServerError, "evaluation"
		var bad *admission.BadReviewError
		switch {
		case errors.As(err, &bad):
			// The sender's error: a 500 would page the webhook's owners.
			code, reason = http.StatusBadRequest, "bad_request"
		case errors.Is(err, context.DeadlineExceeded):
			code, reason = http.StatusGatewayTimeout, "timeout"
		}
		h.log.Warn("request not evaluated", "webhook", name, "uid", review.Request.UID, "kind", req.Kind.String(),
			"namespace", req.Namespace, "name", req.Name, "error", err)
		h.fail(w, name, start, string(req.Operation), code, reason, err.Error())
		return
	}
	out, err := response(review, res, req.Object)
	if err != nil {
		h.fail(w, name, start, string(req.Operation), http.StatusInternalServerError, "encoding", err.Error())
		return
	}
	decision := "allowed"
	switch {
	case !res.Allowed:
		decision = "denied"
		if !req.DryRun {
			h.metrics.rejections.WithLabelValues(name, policyOf(res.Status.Message)).Inc()
		}
	case out.Response.Patch != nil:
		decision = "patched"
	}
	data, err := json.Marshal(out)
	if err != nil {
		h.fail(w, name, start, string(req.Operation), http.StatusInternalServerError, "encoding", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
	op := string(req.Operation)
	h.metrics.requests.WithLabelValues(name, op, decision, strconv.FormatBool(req.DryRun)).Inc()
	h.metrics.latency.WithLabelValues(name, op, decision).Observe(time.Since(start).Seconds())
	if h.log.Enabled(r.Context(), slog.LevelDebug) {
		attrs := []any{"webhook", name, "uid", review.Request.UID, "operation", op, "kind", req.Kind.String(),
			"namespace", req.Namespace, "name", req.Name, "decision", decision, "dryRun", req.DryRun,
			"seconds", time.Since(start).Seconds()}
		if !res.Allowed {
			attrs = append(attrs, "message", res.Status.Message)
		}
		h.log.Debug("review", attrs...)
	}
}

// acquire returns the set in force, held until release so that a reload
// does not close it under a running evaluation.
func (h *Handler) acquire() *policySet {
	for {
		set := h.current.Load()
		if set == nil {
			return nil
		}
		set.mu.RLock()
		if !set.closed {
			return set
		}
		// Retired between Load and RLock: take the newer one.
		set.mu.RUnlock()
	}
}

// evaluate runs the review on its own goroutine so that the answer keeps
// the deadline even if an evaluation does not watch its context. It
// releases set, and calls release, when the evaluation ends, also after
// the deadline.
func (h *Handler) evaluate(ctx context.Context, set *policySet, req admission.Review, mutate bool, release func()) (*admission.ReviewResult, error) {
	type result struct {
		res *admission.ReviewResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer release()
		defer set.mu.RUnlock()
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("evaluating the policies panicked: %v", p)}
			}
		}()
		var r result
		if req.Kind.Kind != "Namespace" || req.Kind.Group != "" {
			// A namespace's own writes are matched on the object itself.
			if err := h.ensureNamespace(ctx, set, req.Namespace); err != nil {
				done <- result{err: err}
				return
			}
		}
		if mutate {
			r.res, r.err = set.chain.Mutate(ctx, req)
		} else {
			r.res, r.err = set.chain.Validate(ctx, req)
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("evaluating the policies: %w", ctx.Err())
	}
}

// deadline is the time a request may take: the configured timeout, or
// less when the API server's ?timeout= (its timeoutSeconds) is shorter.
func (h *Handler) deadline(r *http.Request) time.Duration {
	d := h.opts.RequestTimeout
	if t, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && t > 0 {
		// Answer before the caller gives up, leaving it time to read.
		if t = t * 3 / 4; t < d {
			d = t
		}
	}
	return d
}

// fail answers with an HTTP error: the API server counts it as a failed
// call and applies the webhook's failurePolicy. It is counted as decision
// "error" with its latency, so that timeouts show in the percentiles.
func (h *Handler) fail(w http.ResponseWriter, name string, start time.Time, op string, code int, reason, msg string) {
	h.metrics.errors.WithLabelValues(name, reason).Inc()
	h.metrics.requests.WithLabelValues(name, op, "error", "unknown").Inc()
	h.metrics.latency.WithLabelValues(name, op, "error").Observe(time.Since(start).Seconds())
	http.Error(w, msg, code)
}
