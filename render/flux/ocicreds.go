package flux

import (
	"errors"
	"fmt"
	"net/http"

	"helm.sh/helm/v4/pkg/helmpath"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// registryClient is an oras-go client sending the credentials of the
// registry config file (empty: Helm's, as `helm registry login` writes
// it), with Docker's config.json as fallback when dockerFallback is set,
// as Helm's registry client reads them.
func registryClient(configFile string, dockerFallback bool) (*auth.Client, error) {
	if configFile == "" {
		configFile = helmpath.ConfigPath(helmregistry.CredentialsFileBasename)
	}
	opts := credentials.StoreOptions{}
	store, err := credentials.NewStore(configFile, opts)
	if err != nil {
		return nil, fmt.Errorf("reading the registry config %s: %w", configFile, err)
	}
	var creds credentials.Store = store
	if docker, err := credentials.NewStoreFromDocker(opts); err == nil && dockerFallback {
		creds = credentials.NewStoreWithFallbacks(store, docker)
	}
	return &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(creds)}, nil
}

// refused says whether err is a registry refusing access, or asking for
// basic auth credentials there are none of.
func refused(err error) bool {
	var resp *errcode.ErrorResponse
	return errors.Is(err, auth.ErrBasicCredentialNotFound) ||
		errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden)
}
