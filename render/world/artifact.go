package world

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/render/flux"
)

// artifactGenerator is a source.extensions.fluxcd.io ArtifactGenerator, as
// far as assembling its artifacts goes.
type artifactGenerator struct {
	Spec struct {
		Sources []struct {
			Alias     string `json:"alias"`
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"sources"`
		Artifacts []struct {
			Name string `json:"name"`
			Copy []struct {
				From     string   `json:"from"`
				To       string   `json:"to"`
				Exclude  []string `json:"exclude"`
				Strategy string   `json:"strategy"`
			} `json:"copy"`
		} `json:"artifacts"`
	} `json:"spec"`
}

// copyRules returns the copy rules of the generator's artifact name.
func (g *artifactGenerator) copyRules(name string) ([]flux.CopyRule, bool) {
	for _, a := range g.Spec.Artifacts {
		if a.Name != name {
			continue
		}
		rules := make([]flux.CopyRule, len(a.Copy))
		for i, c := range a.Copy {
			rules[i] = flux.CopyRule{From: c.From, To: c.To, Exclude: c.Exclude, Strategy: c.Strategy}
		}
		return rules, true
	}
	return nil, false
}

func parseArtifactGenerator(obj *unstructured.Unstructured) (*artifactGenerator, error) {
	var g artifactGenerator
	if err := decodeSpec(obj, &g); err != nil {
		return nil, fmt.Errorf("reading the ArtifactGenerator: %w", err)
	}
	return &g, nil
}
