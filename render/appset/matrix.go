package appset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"dario.cat/mergo"
)

// matrixGenerator is spec.generators[].matrix.
type matrixGenerator struct {
	Generators []map[string]any `json:"generators"`
	Template   map[string]any   `json:"template"`
}

// mergeGenerator is spec.generators[].merge.
type mergeGenerator struct {
	Generators []map[string]any `json:"generators"`
	MergeKeys  []string         `json:"mergeKeys"`
	Template   map[string]any   `json:"template"`
}

// unsupportedIn returns the first generator of entry g (and of its
// matrix and merge children) truce does not run, "" for none.
func unsupportedIn(g map[string]any, depth int) string {
	for _, kind := range generatorKinds {
		if g[kind] == nil {
			continue
		}
		if unsupported[kind] != "" {
			return kind
		}
		if (kind == "matrix" || kind == "merge") && depth < 2 {
			m, _ := g[kind].(map[string]any)
			children, _ := m["generators"].([]any)
			for _, c := range children {
				if child, ok := c.(map[string]any); ok {
					if k := unsupportedIn(child, depth+1); k != "" {
						return k
					}
				}
			}
		}
	}
	return ""
}

// childParams mirrors the getParams of MatrixGenerator and
// MergeGenerator: a child entry runs as a generator without a template,
// and must be exactly one generator.
func (x *expander) childParams(ctx context.Context, child map[string]any, depth int, params map[string]any) ([]map[string]any, error) {
	t, err := x.transform(ctx, child, depth+1, params)
	if err != nil {
		return nil, fmt.Errorf("child generator returned an error on parameter generation: %w", err)
	}
	switch {
	case len(t) == 0:
		return nil, errors.New("child generator generated no parameters")
	case len(t) > 1:
		return nil, errors.New("found more than one generator in matrix.Generators")
	}
	return t[0].params, nil
}

// matrixParams mirrors MatrixGenerator.GenerateParams: every parameter
// set of the first child with every one of the second, the second
// interpolated with the first's; Go templates merge them (the first
// wins), fasttemplate refuses a key both set differently.
func (x *expander) matrixParams(ctx context.Context, m matrixGenerator, depth int) ([]map[string]any, error) {
	switch {
	case len(m.Generators) < 2:
		return nil, errors.New("found less than two generators, Matrix support only two")
	case len(m.Generators) > 2:
		return nil, errors.New("found more than two generators, Matrix support only two")
	}
	first, err := x.childParams(ctx, m.Generators[0], depth, nil)
	if err != nil {
		return nil, fmt.Errorf("error failed to get params for first generator in matrix generator: %w", err)
	}
	var out []map[string]any
	for _, a := range first {
		second, err := x.childParams(ctx, m.Generators[1], depth, a)
		if err != nil {
			return nil, fmt.Errorf("failed to get params for second generator in the matrix generator: %w", err)
		}
		for _, b := range second {
			p, err := x.combine(a, b)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
			if len(out) > x.opts.MaxApplications {
				return nil, fmt.Errorf("matrix generator: more than %d parameter sets", x.opts.MaxApplications)
			}
		}
	}
	return out, nil
}

func (x *expander) combine(a, b map[string]any) (map[string]any, error) {
	if x.goTemplate {
		tmp := map[string]any{}
		if err := mergo.Merge(&tmp, deepCopyParams(b), mergo.WithOverride); err != nil {
			return nil, err
		}
		if err := mergo.Merge(&tmp, deepCopyParams(a), mergo.WithOverride); err != nil {
			return nil, err
		}
		return tmp, nil
	}
	// utils.CombineStringMaps
	out := map[string]any{}
	for k, v := range a {
		out[k] = fmt.Sprintf("%v", v)
	}
	for k, v := range b {
		s := fmt.Sprintf("%v", v)
		if cur, ok := out[k]; ok && cur != s {
			return nil, fmt.Errorf("found duplicate key %s with different value, a: %s ,b: %s", k, cur, s)
		}
		out[k] = s
	}
	return out, nil
}

// mergeParams mirrors MergeGenerator.GenerateParams: the first child's
// parameter sets, each overridden by the sets of later children with the
// same values of the merge keys. Argo CD returns them in map order; they
// are sorted by their merge key values here.
func (x *expander) mergeParams(ctx context.Context, m mergeGenerator, depth int) ([]map[string]any, error) {
	if len(m.Generators) < 2 {
		return nil, errors.New("found less than two generators, Merge requires two or more")
	}
	var sets [][]map[string]any
	for i, g := range m.Generators {
		p, err := x.childParams(ctx, g, depth, nil)
		if err != nil {
			return nil, fmt.Errorf("error getting params from generator %d of %d: %w", i+1, len(m.Generators), err)
		}
		sets = append(sets, p)
	}
	base, err := byMergeKey(m.MergeKeys, sets[0])
	if err != nil {
		return nil, err
	}
	for _, s := range sets[1:] {
		over, err := byMergeKey(m.MergeKeys, s)
		if err != nil {
			return nil, err
		}
		for key, b := range base {
			o, ok := over[key]
			if !ok {
				continue
			}
			if x.goTemplate {
				if err := mergo.Merge(&b, deepCopyParams(o), mergo.WithOverride); err != nil {
					return nil, fmt.Errorf("error merging base param set with override param set: %w", err)
				}
				base[key] = b
			} else {
				maps.Copy(b, o)
			}
		}
	}
	keys := make([]string, 0, len(base))
	for k := range base {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]map[string]any, len(keys))
	for i, k := range keys {
		out[i] = base[k]
	}
	return out, nil
}

// byMergeKey indexes parameter sets by the JSON of their merge keys'
// values (getParamSetsByMergeKey).
func byMergeKey(mergeKeys []string, sets []map[string]any) (map[string]map[string]any, error) {
	if len(mergeKeys) < 1 {
		return nil, errors.New("no merge keys were specified, Merge requires at least one")
	}
	out := make(map[string]map[string]any, len(sets))
	for _, p := range sets {
		key := map[string]any{}
		for _, k := range mergeKeys {
			key[k] = p[k]
		}
		raw, err := json.Marshal(key)
		if err != nil {
			return nil, fmt.Errorf("error marshalling param set key json: %w", err)
		}
		if _, dup := out[string(raw)]; dup {
			return nil, fmt.Errorf("the parameters from a generator were not unique by the given mergeKeys, Merge requires all param sets to be unique. Duplicate key was %s", raw)
		}
		out[string(raw)] = p
	}
	return out, nil
}

// interpolate returns the generator entry g with params substituted in
// every string (utils.Render.RenderGeneratorParams); a git generator's
// values are resolved with missingkey=error, a value naming a parameter
// that is not there kept as written for the generator to resolve.
func (x *expander) interpolate(g map[string]any, params map[string]any) (map[string]any, error) {
	var values map[string]any
	if git, ok := g["git"].(map[string]any); ok {
		values, _ = git["values"].(map[string]any)
	}
	got, err := x.replaceDeep(withoutValues(g), params)
	if err != nil {
		return nil, err
	}
	out := got.(map[string]any)
	if values == nil {
		return out, nil
	}
	strict, err := x.strict()
	if err != nil {
		return nil, err
	}
	resolved := map[string]any{}
	for k, v := range values {
		s, _ := v.(string)
		r, err := strict.replace(s, params)
		if err != nil {
			if isMissingKey(err) {
				resolved[k] = s
				continue
			}
			return nil, fmt.Errorf("failed to pre-resolve Values key %q: %w", k, err)
		}
		resolved[k] = r
	}
	if git, ok := out["git"].(map[string]any); ok {
		git["values"] = resolved
	}
	return out, nil
}

// withoutValues is g without its git generator's values, which
// interpolate resolves by themselves.
func withoutValues(g map[string]any) map[string]any {
	git, ok := g["git"].(map[string]any)
	if !ok {
		return g
	}
	out := maps.Clone(g)
	gitCopy := maps.Clone(git)
	delete(gitCopy, "values")
	out["git"] = gitCopy
	return out
}

// strict is the engine with missingkey=error in place of any missingkey
// option, for values.
func (x *expander) strict() (*engine, error) {
	if !x.goTemplate {
		return x.engine, nil
	}
	if x.strictEngine != nil {
		return x.strictEngine, nil
	}
	var opts []string
	for _, o := range x.options {
		if !strings.HasPrefix(o, "missingkey=") {
			opts = append(opts, o)
		}
	}
	e, err := newEngine(x.ctx, true, append(opts, "missingkey=error"))
	if err != nil {
		return nil, err
	}
	x.strictEngine = e
	return e, nil
}

func isMissingKey(err error) bool {
	return strings.Contains(err.Error(), "map has no entry for key") || strings.Contains(err.Error(), "can't evaluate field")
}

// deepCopyParams copies a parameter set, so that merging into a copy
// leaves the generator's sets as they were.
func deepCopyParams(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			out[k] = deepCopyParams(v)
		case map[string]string:
			out[k] = maps.Clone(v)
		default:
			out[k] = v
		}
	}
	return out
}
