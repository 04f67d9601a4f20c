package loadgen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/truce-dev/truce/internal/certs"
)

// CallTimeout is how long the client waits for an answer: kube-apiserver's
// default webhook timeoutSeconds. A slower answer is an error, because
// kube-apiserver would give up on it.
const CallTimeout = 10 * time.Second

// maxReviewBytes bounds an AdmissionReview the floor reads: an object and
// its old version of up to kube-apiserver's 3 MiB request limit each, with
// room for the envelope.
const maxReviewBytes = 7 << 20

// ServeOptions choose how a target is served and called; both targets of a
// comparison must use the same.
type ServeOptions struct {
	// Concurrency sizes the client's pool of idle connections, so that
	// over HTTP/1.1 every worker keeps its connection.
	Concurrency int
	// HTTP1 serves and calls over HTTP/1.1. The default is HTTP/2, which
	// kube-apiserver's webhook client (a client-go REST client) negotiates
	// with any server that offers it: all calls share one connection.
	HTTP1 bool
}

// Server is a handler served over TLS on 127.0.0.1, with a client that
// trusts it.
type Server struct {
	// URL is https://127.0.0.1:PORT.
	URL string
	// Client calls the server: it trusts only the server's CA, keeps
	// connections alive and speaks the protocol of ServeOptions.
	Client *http.Client

	srv  *http.Server
	done chan error
}

// Serve serves handler over TLS (1.2 or later) on a free port of
// 127.0.0.1, with a certificate for loopback from a CA made for it. Every
// target of a comparison is served by Serve, so that TLS, the protocol and
// the client are the same for all.
func Serve(handler http.Handler, opts ServeOptions) (*Server, error) {
	if opts.Concurrency < 1 {
		return nil, fmt.Errorf("serving: concurrency must be at least 1, not %d", opts.Concurrency)
	}
	ca, pair, err := certs.Loopback()
	if err != nil {
		return nil, fmt.Errorf("serving: certificates: %w", err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving: certificates: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.PEM) {
		return nil, errors.New("serving: the loopback CA does not parse")
	}

	var protocols http.Protocols
	if opts.HTTP1 {
		protocols.SetHTTP1(true)
	} else {
		protocols.SetHTTP2(true)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	s := &Server{
		URL: "https://" + ln.Addr().String(),
		srv: &http.Server{
			Handler:           handler,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			Protocols:         &protocols,
			ReadHeaderTimeout: CallTimeout,
			IdleTimeout:       90 * time.Second,
		},
		Client: &http.Client{
			Timeout: CallTimeout,
			Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
				Protocols:           &protocols,
				MaxIdleConnsPerHost: opts.Concurrency,
				IdleConnTimeout:     90 * time.Second,
				TLSHandshakeTimeout: CallTimeout,
			},
		},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.ServeTLS(ln, "", "") }()
	return s, nil
}

// Close stops the server: it closes the client's idle connections and
// waits, until ctx is done, for the server's connections to end (a
// connection the client abandoned mid-handshake ends on its own), then
// stops what is left at once.
func (s *Server) Close(ctx context.Context) error {
	s.Client.CloseIdleConnections()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("stopping the server at %s: %w", s.URL, err)
	}
	return nil
}

// NoopHandler is the floor: the least a real Go admission webhook does. It
// reads the AdmissionReview (bounded), decodes it into the API type, and
// allows the request, answering with its uid. Any path is served, so that
// it stands in for both /mutate and /validate.
func NoopHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "an AdmissionReview is POSTed", http.StatusMethodNotAllowed)
			return
		}
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
		if err != nil {
			http.Error(w, "reading the AdmissionReview: "+err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(data, &review); err != nil {
			http.Error(w, "decoding the AdmissionReview: "+err.Error(), http.StatusBadRequest)
			return
		}
		if review.Request == nil {
			http.Error(w, "the AdmissionReview has no request", http.StatusBadRequest)
			return
		}
		out, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true},
		})
		if err != nil {
			http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}
