package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	gcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/kyverno/sdk/extensions/registryclient"
)

// errRegistryOffline is what every registry lookup answers: truce predicts
// offline, and what a registry would say (image data, signatures,
// attestations) cannot be known without asking it.
var errRegistryOffline = errors.New("truce runs Kyverno offline: registries are not contacted, so image data and signatures cannot be predicted")

// offlineRegistry is the registry client Kyverno's engine gets in place of
// registryclient.New(): verifyImages, imageRegistry context entries and the
// image-data libraries fail their rule, naming the image, instead of
// reaching a registry from the machine truce runs on.
type offlineRegistry struct{}

var _ registryclient.Client = offlineRegistry{}

func (offlineRegistry) Keychain() authn.Keychain { return authn.NewMultiKeychain() }

func (offlineRegistry) FetchImageDescriptor(_ context.Context, ref string) (*gcrremote.Descriptor, error) {
	return nil, fmt.Errorf("image %s: %w", ref, errRegistryOffline)
}

func (offlineRegistry) Options(context.Context) ([]gcrremote.Option, []name.Option, error) {
	return nil, nil, errRegistryOffline
}

func (offlineRegistry) NameOptions() []name.Option { return nil }
