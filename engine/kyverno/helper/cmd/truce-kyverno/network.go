package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	gcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
)

// errOffline is what any network access from this process answers.
var errOffline = errors.New("truce runs Kyverno offline: the network is not reached, so what a registry or service would answer cannot be predicted")

// offlineTransport refuses every HTTP request before any name lookup or
// connection.
type offlineTransport struct{}

func (offlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), errOffline)
}

// offlineNetworkDial refuses every connection (the resolver's).
func offlineNetworkDial(_ context.Context, network, addr string) (net.Conn, error) {
	return nil, fmt.Errorf("%s %s: %w", network, addr, errOffline)
}

// offlineNetwork cuts this process off the network beyond Kyverno's
// registry transport (offlineRegistryTransport): any client left on
// go-containerregistry's or Go's default transport, and the resolver,
// refuse too, so no code path of Kyverno's reaches a registry, a service
// or DNS from the machine truce runs on.
func offlineNetwork() {
	gcrremote.DefaultTransport = offlineTransport{}
	http.DefaultTransport = offlineTransport{}
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: offlineNetworkDial}
}
