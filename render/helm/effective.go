package helm

import (
	"fmt"

	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
)

// EffectiveValues are the values templates see for values: values over
// the chart's own values.yaml and its subcharts', coalesced as Helm does.
func (c *Chart) EffectiveValues(values map[string]any) (map[string]any, error) {
	out, err := commonutil.CoalesceValues(cloneChart(c.Chart), copyValues(values))
	if err != nil {
		return nil, fmt.Errorf("%s: coalescing values: %w", c, err)
	}
	return out, nil
}
