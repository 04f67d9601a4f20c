package admission

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// InProcessWebhook serves the webhooks of one Service inside the process: a
// policy engine truce runs itself (Kyverno, Gatekeeper) answers there, so
// the engine's webhook configurations place it in the chain exactly where
// the real engine sits, and kube-apiserver's own webhook plugin matches,
// orders, reinvokes, times out and applies failurePolicy to it.
type InProcessWebhook struct {
	// Handler answers AdmissionReview POSTs on the configurations' paths.
	Handler http.Handler
	// Certificate is served for SERVICE.NAMESPACE.svc; the engine's webhook
	// configurations carry its CA in caBundle, which the plugin verifies.
	Certificate tls.Certificate
}

// InProcessWebhooks maps "namespace/service" to the webhook serving it.
type InProcessWebhooks map[string]InProcessWebhook

// inProcessHost is what services served in process resolve to; their
// dialer connects to the process's own loopback listener instead.
const inProcessHost = "in-process.truce.invalid:443"

// inProcessServers runs one TLS server per in-process webhook service for
// the lifetime of a chain, on a loopback port only its dialer uses. (An
// in-memory pipe deadlocks when the client aborts a TLS handshake: its
// writes have no buffer.)
type inProcessServers struct {
	addrs   map[string]string
	servers []*http.Server
}

func startInProcess(hooks InProcessWebhooks) (*inProcessServers, error) {
	s := &inProcessServers{addrs: map[string]string{}}
	for service, hook := range hooks {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, fmt.Errorf("serving the in-process webhook %s: %w", service, err)
		}
		srv := &http.Server{
			Handler:           hook.Handler,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{hook.Certificate}, MinVersion: tls.VersionTLS12},
			ReadHeaderTimeout: 10 * time.Second,
			// The upstream client logs nothing useful from a failed
			// handshake that the dispatcher's own error does not say.
			ErrorLog: log.New(io.Discard, "", 0),
		}
		s.addrs[service] = l.Addr().String()
		s.servers = append(s.servers, srv)
		go func() { _ = srv.ServeTLS(l, "", "") }()
	}
	return s, nil
}

// dialer returns a dial function for service ("namespace/name"), or nil
// when the service is not served in process.
func (s *inProcessServers) dialer(service string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if s == nil {
		return nil
	}
	addr, ok := s.addrs[service]
	if !ok {
		return nil
	}
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("calling the in-process webhook %s: %w", service, err)
		}
		return c, nil
	}
}

func (s *inProcessServers) has(service string) bool {
	if s == nil {
		return false
	}
	_, ok := s.addrs[service]
	return ok
}

func (s *inProcessServers) close() {
	if s == nil {
		return
	}
	for _, srv := range s.servers {
		_ = srv.Close()
	}
}
