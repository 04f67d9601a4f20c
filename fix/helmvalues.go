package fix

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/truce-dev/truce/manifest"
)

// helmValues writes the value admission stores into the Helm values the
// unit renders its chart with (an Application's valuesObject, a
// HelmRelease's values), at the value that lands in the field: the chart
// then renders the final value, and Git holds it. Which value lands is
// found from the rendered field: a string value whose occurrence in Git's
// field, replaced, gives the stored field (image.repository
// "nginx" in "nginx:1.25" → "mirror.local/nginx"), or a value equal to
// the field. Verifying the fix renders and simulates again.
func (e *editor) helmValues(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	t := p.Values
	if t == nil {
		return nil, fmt.Errorf("%s is rendered by the Helm chart %s, whose values truce cannot locate", p.Object.Ref, p.Source.RenderRoot)
	}
	if t.Reason != "" {
		return nil, fmt.Errorf("%s is rendered by the Helm chart %s: %s", p.Object.Ref, p.Source.RenderRoot, t.Reason)
	}
	f, doc, err := e.doc(t.Source)
	if err != nil {
		return nil, err
	}
	desired := map[string]any{}
	if p.Object.Drift != nil {
		for _, fd := range p.Object.Drift.Fields {
			if !fd.DesiredAbsent {
				desired[fd.Pointer] = fd.Desired
			}
		}
	}
	var lines []string
	for _, ptr := range fields {
		git, ok := desired[ptr]
		if !ok {
			return nil, fmt.Errorf("%s is not set by the chart; no value of its values lands there", ptr)
		}
		path, value, ok := landingValue(t.Values, git, values[ptr])
		if !ok {
			return nil, fmt.Errorf("no value of the chart's values lands in %s (%s)", ptr, show(git))
		}
		target := t.Pointer + "/" + pointerOf(path)
		if err := f.Set(doc, target, value); err != nil {
			return nil, fmt.Errorf("setting %s in %s: %w", target, t.Source, err)
		}
		lines = append(lines, fmt.Sprintf("%s = %s (lands in %s)", strings.Join(path, "."), show(value), ptr))
	}
	sort.Strings(lines)
	return e.candidate("Put the mutation in Git (Helm values)",
		fmt.Sprintf("Set %s in the values of %s (%s). The chart then renders the value admission stores, admission has nothing to change, and a diff shows real drift only.",
			strings.Join(lines, "; "), t.Source, t.Pointer), ""), nil
}

// landingValue finds the value among values that renders into a field
// whose Git value is git, and what it must become for the field to be
// stored: the longest string value found in git whose surroundings the
// stored value keeps, else a value equal to git. Paths are compared in
// order, so that the choice is the same on every run.
func landingValue(values map[string]any, git, stored any) ([]string, any, bool) {
	type hit struct {
		path  []string
		value any
		size  int
	}
	var best *hit
	gs, gitString := git.(string)
	ss, storedString := stored.(string)
	walkValues(values, nil, func(path []string, v any) {
		if vs, ok := v.(string); ok && gitString && storedString && vs != "" {
			for i := strings.Index(gs, vs); i >= 0; {
				prefix, suffix := gs[:i], gs[i+len(vs):]
				if len(ss) >= len(prefix)+len(suffix) && strings.HasPrefix(ss, prefix) && strings.HasSuffix(ss, suffix) {
					if best == nil || len(vs) > best.size {
						best = &hit{path: path, value: ss[len(prefix) : len(ss)-len(suffix)], size: len(vs)}
					}
					break
				}
				next := strings.Index(gs[i+1:], vs)
				if next < 0 {
					break
				}
				i += 1 + next
			}
			return
		}
		if best == nil && equalScalar(v, git) {
			best = &hit{path: path, value: stored}
		}
	})
	if best == nil {
		return nil, nil, false
	}
	return best.path, best.value, true
}

// walkValues calls f for every scalar of a values map, maps in key order;
// lists are not entered (a list item's position is not a stable place to
// write to).
func walkValues(m map[string]any, prefix []string, f func([]string, any)) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := append(append([]string(nil), prefix...), k)
		switch v := m[k].(type) {
		case map[string]any:
			walkValues(v, path, f)
		case []any:
		default:
			f(path, v)
		}
	}
}

// equalScalar compares a values scalar with a rendered one, numbers by
// value (YAML gives int, JSON float64 or int64).
func equalScalar(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// pointerOf is a values path as JSON pointer tokens.
func pointerOf(path []string) string {
	toks := make([]string, len(path))
	for i, p := range path {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
	}
	return strings.Join(toks, "/")
}

// rendered says why a rendered object's own file cannot be edited.
func rendered(src manifest.Source) error {
	if src.Renderer == "" {
		return nil
	}
	return fmt.Errorf("%s is rendered by the %s %s; truce does not edit templates", src.File, src.Renderer, src.RenderRoot)
}
