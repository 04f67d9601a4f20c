package apiserver

import (
	"context"
	"net/http"
	"sync"
)

// Per-request state travels in the request context rather than in per-request
// clients: one client (and one cached transport) serves every request, and a
// caller that wants a request's warnings or a chosen audit ID puts a
// requestInfo into the context of that one call.

type requestInfoKey struct{}

// requestInfo is filled in while one request is under way.
type requestInfo struct {
	auditID string

	mu       sync.Mutex
	warnings []string
}

func withRequestInfo(ctx context.Context, auditID string) (context.Context, *requestInfo) {
	ri := &requestInfo{auditID: auditID}
	return context.WithValue(ctx, requestInfoKey{}, ri), ri
}

func requestInfoFrom(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return ri
}

func (ri *requestInfo) Warnings() []string {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	return append([]string(nil), ri.warnings...)
}

// auditIDRoundTripper sets the Audit-ID request header from the context.
// kube-apiserver adopts a client-supplied Audit-ID as the audit event's ID, so
// the harness can find the audit entry of exactly the request it made.
type auditIDRoundTripper struct{ next http.RoundTripper }

func (rt auditIDRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if ri := requestInfoFrom(req.Context()); ri != nil && ri.auditID != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Audit-ID", ri.auditID)
	}
	return rt.next.RoundTrip(req)
}

// warningCollector records each Warning response header into the request's
// requestInfo, in the order the server sent them. Requests without one
// (informers, sweeps) drop their warnings: the harness is not a CLI.
type warningCollector struct{}

func (warningCollector) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	// 299 is the only warn-code kube-apiserver uses; anything else would be
	// from some proxy in between, which loopback does not have.
	if code != 299 {
		return
	}
	if ri := requestInfoFrom(ctx); ri != nil {
		ri.mu.Lock()
		ri.warnings = append(ri.warnings, text)
		ri.mu.Unlock()
	}
}
