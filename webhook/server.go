package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// ServerOptions configure the HTTPS server around a Handler.
type ServerOptions struct {
	// Addr serves /mutate and /validate over TLS; ProbeAddr serves
	// /healthz, /readyz and /metrics over plain HTTP (kubelet probes and
	// Prometheus present no client certificate); empty disables it.
	Addr, ProbeAddr string
	// CertFile and KeyFile are reloaded from disk when they change.
	CertFile, KeyFile string
	// ClientCAFile, when set, requires the API server to present a client
	// certificate signed by one of its CAs.
	ClientCAFile string
	// ReloadInterval is how often the policy files are checked for changes.
	ReloadInterval time.Duration
	// ShutdownDelay is how long, once ctx ends, the server keeps serving
	// with /readyz failing, so that endpoints drop it before its listener
	// closes (a request whose headers arrive after the close is lost).
	ShutdownDelay time.Duration
	// ShutdownGrace then bounds how long in-flight requests may take to
	// finish.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
	// Listening, when set, is called with the bound addresses once both
	// listeners accept connections (tests bind port 0).
	Listening func(addr, probeAddr net.Addr)
}

// Serve runs h over HTTPS until ctx ends, then shuts down gracefully:
// listeners close, in-flight reviews finish (up to ShutdownGrace).
func Serve(ctx context.Context, h *Handler, o ServerOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	tlsConfig, watcher, err := serverTLS(o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.Addr, err)
	}
	var probeLn net.Listener
	if o.ProbeAddr != "" {
		if probeLn, err = net.Listen("tcp", o.ProbeAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s: %w", o.ProbeAddr, err)
		}
	}
	errLog := slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 5 * time.Second,
		// The API server waits at most 30 s for any webhook.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  90 * time.Second,
		ErrorLog:     errLog,
		// HTTP/1.1 only, as controller-runtime's webhook server: with
		// HTTP/2 the API server multiplexes its calls over one connection
		// to one replica behind the Service, and HTTP/2's stream handling
		// has been a denial-of-service surface (CVE-2023-44487).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	probes := &http.Server{Handler: h.Probes(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: errLog}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := watcher.Start(gctx); err != nil {
			return fmt.Errorf("watching the serving certificate: %w", err)
		}
		return nil
	})
	if o.ReloadInterval > 0 {
		g.Go(func() error { h.Watch(gctx, o.ReloadInterval); return nil })
	}
	g.Go(func() error {
		if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving webhooks: %w", err)
		}
		return nil
	})
	if probeLn != nil {
		g.Go(func() error {
			if err := probes.Serve(probeLn); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving probes: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		h.draining.Store(true)
		if o.ShutdownDelay > 0 && ctx.Err() != nil {
			o.Logger.Info("draining: /readyz fails, still serving", "delay", o.ShutdownDelay)
			time.Sleep(o.ShutdownDelay)
		}
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownGrace)
		defer cancel()
		o.Logger.Info("shutting down; finishing in-flight requests", "grace", o.ShutdownGrace)
		err := srv.Shutdown(shutdownCtx)
		if perr := probes.Shutdown(shutdownCtx); err == nil {
			err = perr
		}
		if err != nil {
			return fmt.Errorf("shutting down: %w", err)
		}
		return nil
	})
	var probeAddr net.Addr
	if probeLn != nil {
		probeAddr = probeLn.Addr()
	}
	o.Logger.Info("serving", "addr", ln.Addr().String(), "probes", fmt.Sprint(probeAddr), "clientAuth", o.ClientCAFile != "")
	if o.Listening != nil {
		o.Listening(ln.Addr(), probeAddr)
	}
	return g.Wait()
}

// serverTLS is TLS 1.2 at least, 1.3 preferred (Go negotiates the highest
// both sides speak), with the certificate read on each handshake from a
// watcher that reloads it when the files change: a renewed certificate is
// served without a restart and without dropping connections.
func serverTLS(o ServerOptions) (*tls.Config, *certwatcher.CertWatcher, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, nil, errors.New("a serving certificate and key are required (--tls-cert, --tls-key); `truce webhook certs` makes them")
	}
	watcher, err := certwatcher.New(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the serving certificate %s: %w", o.CertFile, err)
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: watcher.GetCertificate,
	}
	if o.ClientCAFile != "" {
		pem, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: no PEM certificate in it", o.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, watcher, nil
}
