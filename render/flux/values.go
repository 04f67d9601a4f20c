package flux

import (
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Values composes the values helm-controller installs hr's chart with,
// following fluxcd/pkg/chartutil's ChartValuesFromReferences (v1.27):
// valuesFrom in order, each read from the ConfigMap or Secret among
// objects in hr's namespace, merged at the root or set at TargetPath with
// Helm's --set parser, then spec.values over everything. Maps merge
// recursively with Helm's MergeMaps; anything else is replaced.
//
// A missing ConfigMap, Secret or key is an error naming it, unless the
// reference is optional. Errors never quote a Secret's contents.
func Values(hr *HelmRelease, objects []*unstructured.Unstructured) (map[string]any, error) {
	keys := make(map[objectKey]bool)
	for _, ref := range hr.ValuesFrom {
		keys[objectKey{ref.Kind, hr.Namespace, ref.Name}] = true
	}
	found, err := lookup(objects, keys)
	if err != nil {
		return nil, fmt.Errorf("composing the values of HelmRelease %s/%s: %w", hr.Namespace, hr.Name, err)
	}
	// chartutil merges the same spec.values map twice and lets --set
	// paths write through into it; a copy keeps that from reaching hr.
	specValues := deepCopy(hr.Values)
	result := common.Values{}
	for _, ref := range hr.ValuesFrom {
		key := objectKey{ref.Kind, hr.Namespace, ref.Name}
		obj, ok := found[key]
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, valuesError(hr, ref, "not found")
		}
		data, ok := dataOf(obj, ref.ValuesKey)
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, valuesError(hr, ref, "key not found")
		}
		if ref.TargetPath != "" {
			result = loader.MergeMaps(result, specValues)
			if err := setPath(result, ref, data); err != nil {
				return nil, valuesError(hr, ref, "failed to merge value"+detail(ref, err))
			}
			continue
		}
		values, err := common.ReadValues([]byte(data))
		if err != nil {
			return nil, valuesError(hr, ref, "failed to read values data"+detail(ref, err))
		}
		result = loader.MergeMaps(result, values)
	}
	return loader.MergeMaps(result, specValues), nil
}

func dataOf(obj client.Object, key string) (string, bool) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		v, ok := o.Data[key]
		return v, ok
	case *corev1.Secret:
		v, ok := o.Data[key]
		return string(v), ok
	}
	return "", false
}

// setPath is chartutil's ReplacePathValue and ReplacePathLiteralValue: a
// quoted value is set as a string, a literal one verbatim, anything else
// as --set would.
func setPath(values common.Values, ref ValuesReference, value string) error {
	if ref.Literal {
		escaper := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `[`, `\[`, `]`, `\]`, `{`, `\{`, `}`, `\}`)
		return strvals.ParseIntoString(ref.TargetPath+"="+escaper.Replace(value), values)
	}
	single := strings.HasPrefix(value, "'") && strings.HasSuffix(value, "'")
	double := strings.HasPrefix(value, `"`) && strings.HasSuffix(value, `"`)
	if single || double {
		return strvals.ParseIntoString(ref.TargetPath+"="+strings.Trim(value, `'"`), values)
	}
	return strvals.ParseInto(ref.TargetPath+"="+value, values)
}

// detail is the parser's message, except for Secrets, whose contents it
// may quote.
func detail(ref ValuesReference, err error) string {
	if ref.Kind == "Secret" {
		return ""
	}
	return ": " + err.Error()
}

// valuesError words a failed reference as chartutil's ErrValuesReference.
func valuesError(hr *HelmRelease, ref ValuesReference, reason string) error {
	optional := ""
	if ref.Optional {
		optional = " optional"
	}
	return fmt.Errorf("composing the values of HelmRelease %s/%s: could not resolve%s %s chart values reference '%s/%s' with key '%s': %s",
		hr.Namespace, hr.Name, optional, ref.Kind, hr.Namespace, ref.Name, ref.ValuesKey, reason)
}

// deepCopy copies the maps and lists of a values tree.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}
