package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/truce-dev/truce/internal/ocitest"
)

// pushChart stores the web fixture at version in reg as
// repository:version, the way helm push lays a chart out: its metadata as
// config, the packaged chart as the layer.
func pushChart(t *testing.T, reg *ocitest.Registry, repository, version string) {
	t.Helper()
	ch, err := LoadArchiveOrDir(fixture(t, "charts/web"))
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version = version
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layer, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	config, err := json.Marshal(ch.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	reg.PushWithConfig(t, repository, version, ocitest.Layer{MediaType: registry.ConfigMediaType, Data: config},
		ocitest.Layer{MediaType: registry.ChartLayerMediaType, Data: layer})
}

// registryConfig is an empty credentials file, so that tests do not read
// the user's registry logins.
func registryConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
