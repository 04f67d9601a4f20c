package fix

import (
	"sort"
	"strconv"
	"strings"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

// maxProbeRenders bounds the renders one field's probing makes: a chart's
// values can be many, and each render runs the whole chart.
const maxProbeRenders = 32

// probe finds the value that lands in the field ptr by rendering the chart
// with unique probe strings in place of its string values: first all at
// once, then, when that render fails or loses the object (a probe in a
// condition or a name), one at a time for the values most likely to land,
// at most maxProbeRenders renders in all. The field rendered with a probe
// is prefix+probe+suffix; the value lands when the stored field keeps
// that prefix and suffix, and must become what is between them. Of
// several values landing, the longest original wins, as in landingValues.
func probe(p Problem, ptr string, stored any) ([]string, any, bool) {
	ss, ok := stored.(string)
	if !ok {
		return nil, nil, false
	}
	t := p.Values
	type leaf struct {
		path     []string
		original string
		token    string
	}
	var leaves []leaf
	walkValues(t.Values, nil, func(path []string, v any) {
		if s, ok := v.(string); ok {
			leaves = append(leaves, leaf{path: path, original: s, token: "truceprobe" + strconv.Itoa(len(leaves)) + "x"})
		}
	})
	if len(leaves) == 0 {
		return nil, nil, false
	}
	// restore puts the originals back in place of the probes but one.
	restore := func(s string, keep int) string {
		for i := len(leaves) - 1; i >= 0; i-- {
			if i != keep {
				s = strings.ReplaceAll(s, leaves[i].token, leaves[i].original)
			}
		}
		return s
	}
	best, bestSize := -1, -1
	var bestValue string
	consider := func(field string, i int) {
		at := strings.Index(field, leaves[i].token)
		if at < 0 {
			return
		}
		prefix, suffix := field[:at], field[at+len(leaves[i].token):]
		if len(ss) < len(prefix)+len(suffix) || !strings.HasPrefix(ss, prefix) || !strings.HasSuffix(ss, suffix) {
			return
		}
		if len(leaves[i].original) > bestSize {
			best, bestSize, bestValue = i, len(leaves[i].original), ss[len(prefix):len(ss)-len(suffix)]
		}
	}
	render := func(probed []int) (string, bool) {
		values := copyMap(t.Values)
		for _, i := range probed {
			if !setPath(values, leaves[i].path, leaves[i].token) {
				return "", false
			}
		}
		objs, err := t.Probe(values)
		if err != nil {
			return "", false
		}
		field, found := probedField(p, objs, ptr, func(s string) string { return restore(s, -1) })
		return field, found
	}
	all := make([]int, len(leaves))
	for i := range all {
		all[i] = i
	}
	if field, ok := render(all); ok {
		for i := range leaves {
			consider(restore(field, i), i)
		}
		if best >= 0 {
			return leaves[best].path, bestValue, true
		}
	}
	// One at a time: values found in the Git field first, then empty
	// ones (a template default), then the rest in path order.
	git := ""
	if p.Object.Drift != nil {
		for _, f := range p.Object.Drift.Fields {
			if f.Pointer == ptr {
				git, _ = f.Desired.(string)
			}
		}
	}
	rank := func(l leaf) int {
		switch {
		case l.original != "" && strings.Contains(git, l.original):
			return 0
		case l.original == "":
			return 1
		}
		return 2
	}
	order := append([]int(nil), all...)
	sort.SliceStable(order, func(a, b int) bool { return rank(leaves[order[a]]) < rank(leaves[order[b]]) })
	for n, i := range order {
		if n >= maxProbeRenders-1 {
			break
		}
		if field, ok := render([]int{i}); ok {
			consider(field, i)
		}
	}
	if best < 0 {
		return nil, nil, false
	}
	return leaves[best].path, bestValue, true
}

// probedField finds the problem's object among a probe render's objects,
// by kind, template file and name (with the probes put back), and returns
// its field ptr as a string.
func probedField(p Problem, objs []manifest.Object, ptr string, restore func(string) string) (string, bool) {
	ref := p.Object.Ref
	for _, o := range objs {
		if o.Object.GetKind() != ref.Kind || o.Object.GroupVersionKind().Group != ref.Group {
			continue
		}
		if p.Source.File != "" && o.Source.File != p.Source.File {
			continue
		}
		if restore(o.Object.GetName()) != ref.Name {
			continue
		}
		v, ok := valueAt(o.Object.Object, ptr)
		if !ok {
			return "", false
		}
		s, ok := v.(string)
		return s, ok
	}
	return "", false
}

// valueAt is the value at a JSON pointer ("" and malformed pointers
// have none here).
func valueAt(obj map[string]any, ptr string) (any, bool) {
	toks, err := ignore.ParsePointer(ptr)
	if err != nil || ptr == "" {
		return nil, false
	}
	return ignore.ValueAt(obj, toks)
}

// copyMap copies the maps of a values tree; lists and scalars are shared,
// as probes replace map entries only.
func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = copyMap(sub)
		}
		out[k] = v
	}
	return out
}

// setPath sets a leaf of a values tree whose maps exist.
func setPath(m map[string]any, path []string, v any) bool {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	m[path[len(path)-1]] = v
	return true
}
