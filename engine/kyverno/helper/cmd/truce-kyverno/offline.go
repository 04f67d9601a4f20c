package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	gcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/kyverno/sdk/extensions/regcreds"
)

// errOffline is what any network access from this process answers.
var errOffline = errors.New("truce runs Kyverno offline: the network is not reached, so what a registry or service would answer cannot be predicted")

// offlineTransport refuses every HTTP request before any name lookup or
// connection.
type offlineTransport struct{}

func (offlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), errOffline)
}

// offlineDial refuses every connection (in place of a transport's dialer).
func offlineDial(_ context.Context, network, addr string) (net.Conn, error) {
	return nil, fmt.Errorf("%s %s: %w", network, addr, errOffline)
}

// offlineNetwork cuts this process off the network. The registry client
// truce gives Kyverno's engine (offlineRegistry) covers verifyImages, but
// Kyverno builds other clients itself: the CEL image library's data loader
// (libs.NewContextProvider → imagedataloader, over regcreds.DefaultTransport)
// fetched images from the registries named in the policies. Every transport
// those clients default to, and the resolver, refuse instead, so no code path
// of Kyverno's reaches a registry or DNS from the machine truce runs on.
func offlineNetwork() {
	// regcreds.DefaultTransport is a *http.Transport the registry clients
	// wrap (tracing, retries): cut its dialers and proxy rather than
	// replace it.
	regcreds.DefaultTransport.Proxy = nil
	regcreds.DefaultTransport.DialContext = offlineDial
	regcreds.DefaultTransport.DialTLSContext = offlineDial
	gcrremote.DefaultTransport = offlineTransport{}
	http.DefaultTransport = offlineTransport{}
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: offlineDial}
}
