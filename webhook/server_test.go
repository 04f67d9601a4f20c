package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/truce-dev/truce/internal/certs"
)

// running is a Serve in a goroutine.
type running struct {
	url, probeURL string
	stop          context.CancelFunc
	done          chan error
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	// Replace atomically, as a Secret volume does, so that a reader never
	// sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func startServer(t *testing.T, h *Handler, o ServerOptions) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stop: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	o.Addr, o.ProbeAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Listening = func(addr, probe net.Addr) {
		r.url, r.probeURL = "https://"+addr.String(), "http://"+probe.String()
		close(ready)
	}
	go func() { r.done <- Serve(ctx, h, o) }()
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start within 30s")
	}
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func clientFor(caPEM []byte, cert *tls.Certificate, maxVersion uint16) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, MaxVersion: maxVersion}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	ca, serving, err := certs.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	apiserverCA, err := certs.NewCA("apiserver-client-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientPair, err := apiserverCA.Client("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(clientPair.CertPEM, clientPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	strangerCA, _ := certs.NewCA("stranger", time.Hour)
	strangerPair, _ := strangerCA.Client("kube-apiserver", time.Hour)
	stranger, _ := tls.X509KeyPair(strangerPair.CertPEM, strangerPair.KeyPEM)

	certFile, keyFile, clientCA := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "client-ca.crt")
	writeFile(t, certFile, serving.CertPEM)
	writeFile(t, keyFile, serving.KeyPEM)
	writeFile(t, clientCA, apiserverCA.PEM)

	h := newTestHandler(t, []string{"../examples/image-mirror/cluster"}, nil)
	body := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "2", 1)), "deployments")

	t.Run("versions and probes", func(t *testing.T) {
		srv := startServer(t, h, ServerOptions{CertFile: certFile, KeyFile: keyFile})
		for _, tc := range []struct {
			name    string
			max     uint16
			wantErr bool
			wantVer uint16
		}{
			{"TLS 1.3 preferred", 0, false, tls.VersionTLS13},
			{"TLS 1.2 accepted", tls.VersionTLS12, false, tls.VersionTLS12},
			{"TLS 1.1 refused", tls.VersionTLS11, true, 0},
		} {
			resp, err := clientFor(ca.PEM, nil, tc.max).Post(srv.url+"/mutate", "application/json", bytes.NewReader(body))
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Errorf("%s: handshake succeeded", tc.name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.TLS.Version != tc.wantVer {
				t.Errorf("%s: HTTP %d over TLS %x, want 200 over %x", tc.name, resp.StatusCode, resp.TLS.Version, tc.wantVer)
			}
		}
		for path, want := range map[string]string{
			"/healthz": "ok",
			"/readyz":  "[+]policies: in force",
			"/metrics": `truce_webhook_requests_total{decision="patched",dry_run="false",operation="CREATE",webhook="mutate"}`,
		} {
			resp, err := http.Get(srv.probeURL + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
				t.Errorf("%s: HTTP %d %q, want 200 with %q", path, resp.StatusCode, b, want)
			}
		}
	})

	t.Run("client certificates", func(t *testing.T) {
		srv := startServer(t, h, ServerOptions{CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCA})
		for _, tc := range []struct {
			name string
			cert *tls.Certificate
			ok   bool
		}{
			{"no client certificate", nil, false},
			{"certificate of another CA", &stranger, false},
			{"the API server's certificate", &clientCert, true},
		} {
			resp, err := clientFor(ca.PEM, tc.cert, 0).Post(srv.url+"/validate", "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("%s: err=%v, want ok=%v", tc.name, err, tc.ok)
			}
		}
	})

	t.Run("certificate reload without dropped requests", func(t *testing.T) {
		srv := startServer(t, h, ServerOptions{CertFile: certFile, KeyFile: keyFile})
		ca2, serving2, err := certs.Loopback()
		if err != nil {
			t.Fatal(err)
		}
		// Clients trusting both CAs keep sending while the files change.
		both := append(append([]byte{}, ca.PEM...), ca2.PEM...)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failures []string
		sent := 0
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clientFor(both, nil, 0)
				for ctx.Err() == nil {
					resp, err := c.Post(srv.url+"/mutate", "application/json", bytes.NewReader(body))
					mu.Lock()
					sent++
					if err != nil {
						failures = append(failures, err.Error())
					} else {
						if resp.StatusCode != 200 {
							failures = append(failures, resp.Status)
						}
						resp.Body.Close()
					}
					mu.Unlock()
				}
			}()
		}
		writeFile(t, keyFile, serving2.KeyPEM)
		writeFile(t, certFile, serving2.CertPEM)
		// New connections get the new certificate once the watcher saw it.
		only2 := clientFor(ca2.PEM, nil, 0)
		deadline := time.Now().Add(20 * time.Second)
		for {
			only2.CloseIdleConnections()
			resp, err := only2.Post(srv.url+"/mutate", "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the new certificate is not served after 20s: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("%d of %d requests failed during the reload, first: %s", len(failures), sent, failures[0])
		}
	})
}

// TestGracefulShutdown: a request being received when the server is told
// to stop is still answered.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	ca, serving, err := certs.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, serving.CertPEM)
	writeFile(t, keyFile, serving.KeyPEM)
	h := newTestHandler(t, []string{"../examples/image-mirror/cluster"}, nil)
	srv := startServer(t, h, ServerOptions{CertFile: certFile, KeyFile: keyFile, ShutdownGrace: 20 * time.Second})
	body := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "2", 1)), "deployments")

	pr, pw := io.Pipe()
	type answer struct {
		code int
		err  error
	}
	got := make(chan answer, 1)
	started := make(chan struct{})
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/mutate", pr)
		req.ContentLength = int64(len(body))
		resp, err := clientFor(ca.PEM, nil, 0).Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		resp.Body.Close()
		got <- answer{code: resp.StatusCode}
	}()
	go func() {
		_, _ = pw.Write(body[:10]) // headers and a first chunk are on the wire
		close(started)
	}()
	<-started
	// Stop once the server is reading the request.
	waitFor(t, func() bool {
		return strings.Contains(httptestGet(h.Probes(), "/metrics").Body.String(), "truce_webhook_inflight_requests 1")
	})
	srv.stop()
	_, _ = pw.Write(body[10:])
	pw.Close()
	a := <-got
	if a.err != nil || a.code != 200 {
		t.Fatalf("in-flight request: %v, HTTP %d; want 200", a.err, a.code)
	}
	if err := <-srv.done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	srv.done <- nil // for the cleanup
}

// TestPolicyReload: a changed policy file is put in force; a broken one
// leaves the previous set in force and says so in /readyz and /metrics.
func TestPolicyReload(t *testing.T) {
	dir := t.TempDir()
	policy := func(limit int) []byte {
		return []byte(fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= %d"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit}
spec: {policyName: replica-limit, validationActions: [Deny]}
`, limit))
	}
	file := filepath.Join(dir, "policy.yaml")
	writeFile(t, file, policy(5))
	h := newTestHandler(t, []string{dir}, nil)
	body := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "4", 1)), "deployments")
	allowed := func() bool {
		_, out := post(t, h, "/validate", body)
		return out.Response.Allowed
	}
	if !allowed() {
		t.Fatal("4 replicas denied under a limit of 5")
	}
	if changed, err := h.Reload(context.Background()); changed || err != nil {
		t.Fatalf("reload of unchanged files: changed=%v err=%v", changed, err)
	}
	writeFile(t, file, policy(3))
	if changed, err := h.Reload(context.Background()); !changed || err != nil {
		t.Fatalf("reload: changed=%v err=%v", changed, err)
	}
	if allowed() {
		t.Fatal("4 replicas allowed under the new limit of 3")
	}
	writeFile(t, file, []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: [\n"))
	if _, err := h.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "policy.yaml:") {
		t.Fatalf("reload of a broken file: %v, want an error naming the file", err)
	}
	if allowed() {
		t.Fatal("the previous set (limit 3) is not in force after a failed reload")
	}
	rec := httptestGet(h.Probes(), "/readyz")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "[!]reload") || !strings.Contains(rec.Body.String(), "policy.yaml") {
		t.Fatalf("/readyz after a failed reload: %d %q", rec.Code, rec.Body.String())
	}
	if m := httptestGet(h.Probes(), "/metrics").Body.String(); !strings.Contains(m, "truce_webhook_policy_reload_failed 1") ||
		!strings.Contains(m, `truce_webhook_policy_reloads_total{result="error"} 1`) {
		t.Fatalf("/metrics does not report the failed reload:\n%s", m)
	}
}

func httptestGet(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// waitFor polls cond until it holds, failing after 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
