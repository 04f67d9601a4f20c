package fix

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/world"
)

// helmValues writes the value admission stores into the Helm values the
// unit renders its chart with, at the value that lands in the field: the
// chart then renders the final value, and Git holds it. Which value lands
// is found from the rendered field (landing), and where it is written is
// the place that sets it with most precedence (valuesPlace): an Argo CD
// parameter, the inline values, else the last values file of the
// repository setting it. When no value lands, a HelmRelease gets a
// post-renderer patch. Verifying the fix renders and simulates again.
func (e *editor) helmValues(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	t := p.Values
	if t == nil {
		return nil, fmt.Errorf("%s is rendered by the Helm chart %s, whose values truce cannot locate", p.Object.Ref, p.Source.RenderRoot)
	}
	if t.Pointer == "" {
		return nil, fmt.Errorf("%s is rendered by the Helm chart %s: %s", p.Object.Ref, p.Source.RenderRoot, t.Reason)
	}
	desired := map[string]any{}
	if p.Object.Drift != nil {
		for _, fd := range p.Object.Drift.Fields {
			if !fd.DesiredAbsent {
				desired[fd.Pointer] = fd.Desired
			}
		}
	}
	var lines, missed, files []string
	for _, ptr := range fields {
		git, ok := desired[ptr]
		if !ok {
			missed = append(missed, ptr)
			continue
		}
		path, value, ok := landing(p, ptr, git, values[ptr])
		if !ok {
			missed = append(missed, ptr)
			continue
		}
		where, err := e.valuesPlace(t, path, value)
		if err != nil {
			return nil, err
		}
		files = append(files, where)
		lines = append(lines, fmt.Sprintf("%s = %s in %s (lands in %s)", strings.Join(path, "."), show(value), where, ptr))
	}
	sort.Strings(lines)
	if len(missed) > 0 {
		if t.PostRenderers == "" {
			return nil, fmt.Errorf("no value of the chart's values lands in %s; patching the chart's output would need kustomize over Helm (a config management plugin), which truce does not offer", strings.Join(missed, ", "))
		}
		if err := e.postRenderer(p, t, missed, values); err != nil {
			return nil, err
		}
		if len(lines) == 0 {
			return e.candidate("Put the mutation in Git (Flux post-renderer)",
				fmt.Sprintf("No value of the chart's values lands in %s: add a kustomize post-renderer patch to %s that sets %s. Helm's output then holds the value admission stores, admission has nothing to change, and a diff shows real drift only.",
					strings.Join(missed, ", "), t.Source, describeValues(missed, values)), ""), nil
		}
		lines = append(lines, fmt.Sprintf("a post-renderer patch in %s sets %s", t.Source, describeValues(missed, values)))
	}
	return e.candidate("Put the mutation in Git (Helm values)",
		fmt.Sprintf("Set %s. The chart then renders the value admission stores, admission has nothing to change, and a diff shows real drift only.",
			strings.Join(lines, "; ")), sharedWarning(t, files)), nil
}

// valuesPlace writes value at the values path where it takes effect: the
// Argo CD parameter naming it, else the inline values when they set it,
// else the last values file setting it (Helm merges files in order) when
// it is the user's, else the inline values. It returns where it wrote.
func (e *editor) valuesPlace(t *world.ValuesTarget, path []string, value any) (string, error) {
	f, doc, err := e.doc(t.Source)
	inlineErr := err
	if err == nil && t.Reason != "" {
		inlineErr = errors.New(t.Reason)
	}
	if err == nil && t.Parameters != "" {
		if params, ok, _ := f.Get(doc, t.Parameters); ok {
			list, _ := params.([]any)
			for i := len(list) - 1; i >= 0; i-- {
				m, _ := list[i].(map[string]any)
				if m["name"] != strings.Join(path, ".") {
					continue
				}
				ptr := fmt.Sprintf("%s/%d/value", t.Parameters, i)
				if err := f.Set(doc, ptr, fmt.Sprint(value)); err != nil {
					return "", fmt.Errorf("setting %s in %s: %w", ptr, t.Source, err)
				}
				return fmt.Sprintf("the helm parameter of %s", t.Source), nil
			}
		}
	}
	inline := func() (string, error) {
		if inlineErr != nil {
			return "", fmt.Errorf("%s is set by none of the values files of the repository, and the inline values cannot be written: %w", strings.Join(path, "."), inlineErr)
		}
		ptr := t.Pointer + "/" + pointerOf(path)
		if err := f.Set(doc, ptr, value); err != nil {
			return "", fmt.Errorf("setting %s in %s: %w", ptr, t.Source, err)
		}
		return fmt.Sprintf("the values of %s (%s)", t.Source, t.Pointer), nil
	}
	if err == nil {
		if _, ok, _ := f.Get(doc, t.Pointer+"/"+pointerOf(path)); ok {
			return inline()
		}
	}
	for i := len(t.Files) - 1; i >= 0; i-- {
		vf := t.Files[i]
		file, err := e.file(vf.Path)
		if err != nil && vf.NotOwned != "" {
			// Another repository's file that cannot be read again may
			// set the value: only the inline values surely win.
			return inline()
		}
		if err != nil || file.Documents() == 0 {
			continue
		}
		ptr := "/" + pointerOf(path)
		if _, ok, _ := file.Get(0, ptr); !ok {
			continue
		}
		if vf.NotOwned != "" {
			// The winning file is not the user's: the inline values win
			// over it.
			return inline()
		}
		if err := file.Set(0, ptr, value); err != nil {
			return "", fmt.Errorf("setting %s in %s: %w", strings.Join(path, "."), vf.Path, err)
		}
		return vf.Path, nil
	}
	return inline()
}

// sharedWarning warns when a chart's own values.yaml is edited: every
// release of the chart gets the value.
func sharedWarning(t *world.ValuesTarget, written []string) string {
	for _, w := range written {
		if filepath.Base(w) == "values.yaml" && len(t.Files) > 0 && t.Files[0].Path == w {
			return fmt.Sprintf("%s is the chart's own values file: every release of the chart renders the new value.", w)
		}
	}
	return ""
}

// landing finds the value that renders into the field ptr whose Git value
// is git, and what it must become for the field to be stored: by string
// matching (landingValues), and when that finds none or several equally
// good, by rendering the chart with probe values.
func landing(p Problem, ptr string, git, stored any) ([]string, any, bool) {
	t := p.Values
	hits := landingValues(t.Values, git, stored)
	if len(hits) == 1 || len(hits) > 1 && hits[0].size > hits[1].size {
		return hits[0].path, hits[0].value, true
	}
	if t.Probe != nil {
		if path, value, ok := probe(p, ptr, stored); ok {
			return path, value, true
		}
	}
	if len(hits) > 0 {
		return hits[0].path, hits[0].value, true
	}
	return nil, nil, false
}

// hit is a value that lands in a field: its path, what it must become,
// and how much of the field it makes (the length of its string).
type hit struct {
	path  []string
	value any
	size  int
}

// landingValues finds the values among values that render into a field
// whose Git value is git, and what each must become for the field to be
// stored: string values found in git whose surroundings the stored value
// keeps, longest first, else values equal to git. Paths are compared in
// order, so that the choice is the same on every run.
func landingValues(values map[string]any, git, stored any) []hit {
	var strs, equal []hit
	gs, gitString := git.(string)
	ss, storedString := stored.(string)
	walkValues(values, nil, func(path []string, v any) {
		if vs, ok := v.(string); ok && gitString && storedString && vs != "" {
			for i := strings.Index(gs, vs); i >= 0; {
				prefix, suffix := gs[:i], gs[i+len(vs):]
				if len(ss) >= len(prefix)+len(suffix) && strings.HasPrefix(ss, prefix) && strings.HasSuffix(ss, suffix) {
					strs = append(strs, hit{path: path, value: ss[len(prefix) : len(ss)-len(suffix)], size: len(vs)})
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
		if equalScalar(v, git) {
			equal = append(equal, hit{path: path, value: stored})
		}
	})
	sort.SliceStable(strs, func(i, j int) bool { return strs[i].size > strs[j].size })
	if len(strs) > 0 {
		return strs
	}
	return equal
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
