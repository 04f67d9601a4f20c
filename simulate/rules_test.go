package simulate

import (
	"github.com/fluxcd/pkg/ssa/jsondiff"

	"github.com/truce-dev/truce/drift"
)

func fluxRule(path, kind string) drift.FluxRule {
	return drift.FluxRule{Name: "spec.ignore " + path, IgnoreRule: jsondiff.IgnoreRule{Paths: []string{path}, Selector: &jsondiff.Selector{Kind: kind}}}
}
