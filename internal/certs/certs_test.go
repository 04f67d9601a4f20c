package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestChains(t *testing.T) {
	ca, serving, err := Loopback("web.truce-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("CA PEM does not parse")
	}
	for _, tc := range []struct {
		name  string
		pair  *Pair
		usage x509.ExtKeyUsage
		host  string
		ok    bool
	}{
		{"serving for the service name", serving, x509.ExtKeyUsageServerAuth, "web.truce-system.svc", true},
		{"serving for loopback", serving, x509.ExtKeyUsageServerAuth, "127.0.0.1", true},
		{"serving for another name", serving, x509.ExtKeyUsageServerAuth, "other.svc", false},
		{"client for client auth", client, x509.ExtKeyUsageClientAuth, "", true},
		{"client is not a server", client, x509.ExtKeyUsageServerAuth, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tls.X509KeyPair(tc.pair.CertPEM, tc.pair.KeyPEM); err != nil {
				t.Fatalf("key pair: %v", err)
			}
			block, _ := pem.Decode(tc.pair.CertPEM)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err == nil) != tc.ok {
				t.Fatalf("verify: err=%v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// A Service's certificate verifies for its in-cluster name, the name
// kube-apiserver calls a webhook Service by, and for no other.
func TestServiceCertificate(t *testing.T) {
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServiceCertificate("kyverno", "kyverno-svc", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for host, ok := range map[string]bool{"kyverno-svc.kyverno.svc": true, "kyverno-svc.kyverno": false, "other.kyverno.svc": false} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if (err == nil) != ok {
			t.Errorf("%s: verify err=%v, want ok=%v", host, err, ok)
		}
	}
}
