package world

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"helm.sh/helm/v4/pkg/chart/common"

	"github.com/truce-dev/truce/render/helm"
)

// chartValuesFiles are a HelmChart's spec.valuesFiles (or a HelmRelease's
// spec.chart.spec.valuesFiles): source-controller merges them, in order,
// into the chart's values when it packages the chart.
type chartValuesFiles struct {
	Files         []string
	IgnoreMissing bool
}

// apply returns ch with its values replaced by the merged files, as
// source-controller builds the chart: from the source's artifact (root,
// for a chart of a GitRepository; paths relative to its root) or from the
// chart's own files (root empty, for a pulled chart, where values.yaml is
// the chart's values).
func (v chartValuesFiles) apply(ch *helm.Chart, root string) (*helm.Chart, error) {
	if len(v.Files) == 0 {
		return ch, nil
	}
	merged := map[string]any{}
	for _, p := range v.Files {
		var (
			data []byte
			err  error
		)
		if root != "" {
			data, err = v.fromRoot(root, p)
		} else {
			data, err = v.fromChart(ch, p)
		}
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		layer, err := common.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("unmarshaling values from '%s' failed: %w", p, err)
		}
		merged = helm.MergeFlux(merged, layer)
	}
	out := *ch
	c := *ch.Chart
	c.Values = merged
	out.Chart = &c
	return &out, nil
}

// fromRoot reads p under root; nil when it is missing and may be.
func (v chartValuesFiles) fromRoot(root, p string) ([]byte, error) {
	f, err := inRoot(root, root, p)
	if err != nil {
		return nil, fmt.Errorf("values file %q: %w", p, err)
	}
	info, err := os.Stat(f)
	if os.IsNotExist(err) && v.IgnoreMissing {
		return nil, nil
	}
	if err != nil || !info.Mode().IsRegular() {
		rel, _ := filepath.Rel(root, f)
		return nil, fmt.Errorf("no values file found at path '/%s' (reference '%s')", filepath.ToSlash(rel), p)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("could not read values from file '%s': %w", p, err)
	}
	return data, nil
}

// fromChart reads p from the chart's files; nil when it is missing and
// may be.
func (v chartValuesFiles) fromChart(ch *helm.Chart, p string) ([]byte, error) {
	name := path.Clean(p)
	for _, f := range ch.Chart.Raw {
		if f.Name == name {
			return f.Data, nil
		}
	}
	if v.IgnoreMissing {
		return nil, nil
	}
	return nil, fmt.Errorf("no values file found at path '%s'", p)
}
