package helm

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
)

// MergeFlux merges values layers the way helm-controller merges a
// HelmRelease's valuesFrom and values: in order, later layers winning,
// maps merged key by key, anything else replaced. helm-controller's
// chartutil.MergeMaps is a copy of this function of Helm's.
func MergeFlux(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		out = loader.MergeMaps(out, l)
	}
	return out
}

// SetValue sets the value at targetPath (Helm's --set path syntax) as
// helm-controller does for a valuesFrom entry with targetPath: parsed as
// --set parses it, or as --set-string when the value is quoted (the
// quotes removed).
func SetValue(values map[string]any, targetPath, value string) error {
	quoted := strings.HasPrefix(value, "'") && strings.HasSuffix(value, "'") ||
		strings.HasPrefix(value, `"`) && strings.HasSuffix(value, `"`)
	if quoted {
		return strvals.ParseIntoString(targetPath+"="+strings.Trim(value, `'"`), values)
	}
	return strvals.ParseInto(targetPath+"="+value, values)
}

// SetLiteralValue sets value verbatim at targetPath, as helm-controller
// does for a valuesFrom entry with targetPath and literal: true.
func SetLiteralValue(values map[string]any, targetPath, value string) error {
	escaper := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `[`, `\[`, `]`, `\]`, `{`, `\{`, `}`, `\}`)
	return strvals.ParseIntoString(targetPath+"="+escaper.Replace(value), values)
}

// FluxValuesRef is one resolved spec.valuesFrom entry of a HelmRelease:
// the data of the ConfigMap or Secret key it names.
type FluxValuesRef struct {
	// Name describes the reference in errors, e.g. "ConfigMap apps/values
	// key values.yaml".
	Name       string
	Data       []byte
	TargetPath string
	Literal    bool
}

// FluxValues computes a HelmRelease's values from its resolved valuesFrom
// references and spec.values as helm-controller's
// ChartValuesFromReferences does: references in order (YAML documents
// merged, or the value set at TargetPath), then values on top. As there,
// a reference with a TargetPath first merges values into the result, so
// values set before it are overridden by later references.
func FluxValues(values map[string]any, refs ...FluxValuesRef) (map[string]any, error) {
	result := map[string]any{}
	for _, ref := range refs {
		if ref.TargetPath != "" {
			result = loader.MergeMaps(result, values)
			set := SetValue
			if ref.Literal {
				set = SetLiteralValue
			}
			if err := set(result, ref.TargetPath, string(ref.Data)); err != nil {
				return nil, fmt.Errorf("valuesFrom %s: setting %s: %w", ref.Name, ref.TargetPath, err)
			}
			continue
		}
		layer, err := common.ReadValues(ref.Data)
		if err != nil {
			return nil, fmt.Errorf("valuesFrom %s: %w", ref.Name, err)
		}
		result = loader.MergeMaps(result, layer)
	}
	return loader.MergeMaps(result, values), nil
}

// FluxReleaseName is the Helm release name helm-controller uses for a
// HelmRelease: spec.releaseName, else [targetNamespace-]name, shortened to
// Helm's 53 characters with a hash suffix when longer.
func FluxReleaseName(name, targetNamespace, releaseName string) string {
	n := releaseName
	if n == "" {
		n = name
		if targetNamespace != "" {
			n = targetNamespace + "-" + name
		}
	}
	const maxLength, hashLength = 53, 12
	if len(n) <= maxLength {
		return n
	}
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(n)))
	return n[:maxLength-(hashLength+1)] + "-" + sum[:hashLength]
}
