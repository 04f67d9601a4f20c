package main

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	gcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/kyverno/sdk/extensions/regcreds"
)

// TestOfflineNetwork checks that every client Kyverno builds for itself
// is refused before a name lookup: registries (through regcreds' default
// options, as the CEL image library's loader uses them), plain HTTP and DNS.
func TestOfflineNetwork(t *testing.T) {
	offlineRegistryTransport()
	offlineNetwork()
	ref, err := name.ParseReference("ghcr.io/example/app:1.0")
	if err != nil {
		t.Fatal(err)
	}
	opts := regcreds.DefaultOpts()
	checks := map[string]func() error{
		"registry through regcreds' options": func() error {
			_, err := gcrremote.Get(ref, append(opts[:], gcrremote.WithContext(context.Background()))...)
			return err
		},
		"registry with go-containerregistry's defaults": func() error {
			_, err := gcrremote.Get(ref)
			return err
		},
		"net/http's default client": func() error {
			resp, err := http.Get("https://example.com/")
			if err == nil {
				resp.Body.Close()
			}
			return err
		},
		"DNS": func() error {
			_, err := net.DefaultResolver.LookupHost(context.Background(), "example.com")
			return err
		},
	}
	for what, check := range checks {
		// The resolver's error keeps the dialer's only as text; Kyverno's
		// registry transport answers with errRegistryOffline.
		if err := check(); err == nil || !isOffline(err.Error()) {
			t.Errorf("%s: error %v, want one of truce's offline refusals", what, err)
		}
	}
}
