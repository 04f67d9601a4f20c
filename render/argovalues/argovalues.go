// Package argovalues reads the Helm settings of an Argo CD Application's
// sources and the values Argo CD's repo server gives helm template besides
// value files: spec.source.helm.valuesObject (replacing helm.values) as the
// last --values file, then helm.parameters as --set and --set-string.
//
// It is a leaf, without Helm's rendering engine, so that the engines and
// lint rules that read an installed chart's values (Gatekeeper's and
// Kyverno's flags and replicas) read them as render/helm does.
package argovalues

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Parameter is one spec.source.helm.parameters entry.
type Parameter struct {
	Name, Value string
	ForceString bool
}

// Source is one spec.source or spec.sources[] entry of an Application.
type Source struct {
	// Field is where the source is in the Application: "spec.source" or
	// "spec.sources[i]".
	Field                string
	RepoURL, Chart, Path string
	// Values is spec.source.helm.values, YAML.
	Values string
	// ValuesObject is spec.source.helm.valuesObject; when set it replaces
	// Values, as in Argo CD.
	ValuesObject map[string]any
	Parameters   []Parameter
	// ValueFiles are spec.source.helm.valueFiles, which Inline does not
	// read.
	ValueFiles []string
}

// Sources reads spec.source and spec.sources of an Argo CD Application, in
// that order. A helm field of the wrong type is an error naming it.
func Sources(app *unstructured.Unstructured) ([]Source, error) {
	var out []Source
	if src, ok, err := unstructured.NestedMap(app.Object, "spec", "source"); err != nil {
		return nil, fmt.Errorf("spec.source: %w", err)
	} else if ok {
		s, err := source(src, "spec.source")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	list, _, err := unstructured.NestedFieldNoCopy(app.Object, "spec", "sources")
	if err != nil {
		return nil, fmt.Errorf("spec.sources: %w", err)
	}
	if list == nil {
		return out, nil
	}
	items, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("spec.sources: a %T, not a list", list)
	}
	for i, it := range items {
		field := fmt.Sprintf("spec.sources[%d]", i)
		src, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: a %T, not an object", field, it)
		}
		s, err := source(src, field)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func source(src map[string]any, field string) (Source, error) {
	s := Source{Field: field}
	var err error
	str := func(into *string, path ...string) {
		if err != nil {
			return
		}
		var e error
		if *into, _, e = unstructured.NestedString(src, path...); e != nil {
			err = fmt.Errorf("%s.%s: %w", field, strings.Join(path, "."), e)
		}
	}
	str(&s.RepoURL, "repoURL")
	str(&s.Chart, "chart")
	str(&s.Path, "path")
	str(&s.Values, "helm", "values")
	if err != nil {
		return Source{}, err
	}
	if s.ValuesObject, _, err = unstructured.NestedMap(src, "helm", "valuesObject"); err != nil {
		return Source{}, fmt.Errorf("%s.helm.valuesObject: %w", field, err)
	}
	if s.ValueFiles, _, err = unstructured.NestedStringSlice(src, "helm", "valueFiles"); err != nil {
		return Source{}, fmt.Errorf("%s.helm.valueFiles: %w", field, err)
	}
	params, _, err := unstructured.NestedSlice(src, "helm", "parameters")
	if err != nil {
		return Source{}, fmt.Errorf("%s.helm.parameters: %w", field, err)
	}
	for i, p := range params {
		pf := fmt.Sprintf("%s.helm.parameters[%d]", field, i)
		m, ok := p.(map[string]any)
		if !ok {
			return Source{}, fmt.Errorf("%s: a %T, not an object", pf, p)
		}
		var par Parameter
		var e1, e2, e3 error
		par.Name, _, e1 = unstructured.NestedString(m, "name")
		par.Value, _, e2 = unstructured.NestedString(m, "value")
		par.ForceString, _, e3 = unstructured.NestedBool(m, "forceString")
		for _, e := range []error{e1, e2, e3} {
			if e != nil {
				return Source{}, fmt.Errorf("%s: %w", pf, e)
			}
		}
		s.Parameters = append(s.Parameters, par)
	}
	return s, nil
}

// Installs reports whether the source is chart from a repository whose
// URL contains repository (compared without case).
func (s Source) Installs(chart, repository string) bool {
	return s.Chart == chart && strings.Contains(strings.ToLower(s.RepoURL), strings.ToLower(repository))
}

// Inline returns the values the source sets itself, merged as helm
// template merges them: the inline values file (valuesObject, else
// values), then --set, then --set-string. The chart's values.yaml and the
// source's value files are not read.
func (s Source) Inline() (map[string]any, error) {
	inline, err := InlineYAML(s.Values, s.ValuesObject)
	if err != nil {
		return nil, fmt.Errorf("%s.%w", s.Field, err)
	}
	base, err := loader.LoadValues(bytes.NewReader(inline))
	if err != nil {
		what := "helm.values"
		if s.ValuesObject != nil {
			what = "helm.valuesObject"
		}
		return nil, fmt.Errorf("%s.%s: %w", s.Field, what, err)
	}
	set, setString := SetFlags(s.Parameters)
	for _, v := range set {
		if err := strvals.ParseInto(v, base); err != nil {
			return nil, fmt.Errorf("%s.helm.parameters: --set %s: %w", s.Field, v, err)
		}
	}
	for _, v := range setString {
		if err := strvals.ParseIntoString(v, base); err != nil {
			return nil, fmt.Errorf("%s.helm.parameters: --set-string %s: %w", s.Field, v, err)
		}
	}
	return base, nil
}

// InlineYAML is what Argo CD writes to its temporary values file: the
// valuesObject when set, else the values string.
func InlineYAML(values string, valuesObject map[string]any) ([]byte, error) {
	if valuesObject == nil {
		return []byte(values), nil
	}
	b, err := yaml.Marshal(valuesObject)
	if err != nil {
		return nil, fmt.Errorf("helm.valuesObject: %w", err)
	}
	return b, nil
}

// SetFlags are the --set and --set-string arguments Argo CD passes for
// params. It collects them in maps, so a name repeated counts once (the
// last value wins) and their order varies between runs; SetFlags keeps
// the order of first appearance.
func SetFlags(params []Parameter) (set, setString []string) {
	type entry struct {
		name, value string
	}
	var plain, forced []entry
	put := func(list []entry, name, value string) []entry {
		if i := slices.IndexFunc(list, func(e entry) bool { return e.name == name }); i >= 0 {
			list[i].value = value
			return list
		}
		return append(list, entry{name, value})
	}
	for _, p := range params {
		if p.ForceString {
			forced = put(forced, p.Name, p.Value)
		} else {
			plain = put(plain, p.Name, p.Value)
		}
	}
	for _, e := range plain {
		set = append(set, e.name+"="+CleanSetParameters(e.value))
	}
	for _, e := range forced {
		setString = append(setString, e.name+"="+CleanSetParameters(e.value))
	}
	return set, setString
}

// CleanSetParameters escapes the commas of a --set value, which Helm would
// take as separators, unless the value is a {list}: Argo CD's rule (its
// function of that name).
func CleanSetParameters(val string) string {
	if strings.HasPrefix(val, "{") && strings.HasSuffix(val, "}") {
		return val
	}
	var b strings.Builder
	var prev rune
	for _, r := range val {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}
