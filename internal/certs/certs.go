// Package certs generates the small PKI an admission webhook needs: a CA
// whose certificate goes into a webhook configuration's caBundle, a serving
// certificate for the webhook's Service names (and loopback), and client
// certificates the API server presents when the webhook authenticates it.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority able to sign certificates.
type CA struct {
	// PEM is the CA certificate, for a caBundle or a client CA file.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Pair is a certificate and its private key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA returns a new self-signed CA valid for validity from now.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// ServiceCertificate signs a serving certificate for the in-cluster name of
// Service namespace/name ("name.namespace.svc", the server name
// kube-apiserver verifies a webhook Service's certificate against), ready
// to serve with.
func (ca *CA) ServiceCertificate(namespace, name string, validity time.Duration) (tls.Certificate, error) {
	host := name + "." + namespace + ".svc"
	pair, err := ca.Serving(host, []string{host}, nil, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading the serving certificate for %s: %w", host, err)
	}
	return cert, nil
}

// Serving signs a server certificate for dnsNames and ips.
func (ca *CA) Serving(commonName string, dnsNames []string, ips []net.IP, validity time.Duration) (*Pair, error) {
	return ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, validity)
}

// Client signs a client certificate for commonName (the user name a server
// that verifies it sees).
func (ca *CA) Client(commonName string, validity time.Duration) (*Pair, error) {
	return ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity)
}

func (ca *CA) sign(tmpl *x509.Certificate, validity time.Duration) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n, nil
}

// Loopback returns a CA and a serving certificate it signed for 127.0.0.1,
// ::1, localhost and dnsNames, valid for a day: what tests and the load
// generator serve with.
func Loopback(dnsNames ...string) (*CA, *Pair, error) {
	ca, err := NewCA("truce-loopback-ca", 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	pair, err := ca.Serving("truce-loopback", append([]string{"localhost"}, dnsNames...),
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	return ca, pair, nil
}
