package ignore

import (
	"strconv"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// resolve walks toks through v and returns the canonical tokens of the value
// it reaches (list indexes in decimal, negative indexes counted from the end
// as both JSON-patch libraries the tools use allow), and whether it exists.
func resolve(v any, toks []string) ([]string, bool) {
	canon := make([]string, 0, len(toks))
	cur := v
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, false
			}
			canon = append(canon, t)
			cur = next
		case []any:
			i, ok := listIndex(t, len(c))
			if !ok {
				return nil, false
			}
			canon = append(canon, strconv.Itoa(i))
			cur = c[i]
		default:
			return nil, false
		}
	}
	return canon, true
}

// listIndex parses a token as an index into a list of length n.
func listIndex(t string, n int) (int, bool) {
	i, err := strconv.Atoi(t)
	if err != nil {
		return 0, false
	}
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

// pathToTokens converts a structured-merge-diff path into pointer tokens by
// finding keyed and set list items in obj. ok is false when an item is not
// in obj.
func pathToTokens(obj map[string]any, p fieldpath.Path) (toks []string, ok bool) {
	var cur any = obj
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, isMap := cur.(map[string]any)
			if !isMap {
				return nil, false
			}
			toks = append(toks, *pe.FieldName)
			cur = m[*pe.FieldName]
		case pe.Index != nil:
			l, isList := cur.([]any)
			if !isList || *pe.Index < 0 || *pe.Index >= len(l) {
				return nil, false
			}
			toks = append(toks, strconv.Itoa(*pe.Index))
			cur = l[*pe.Index]
		case pe.Key != nil, pe.Value != nil:
			l, isList := cur.([]any)
			if !isList {
				return nil, false
			}
			found := -1
			for i, item := range l {
				if itemMatches(item, pe) {
					found = i
					break
				}
			}
			if found < 0 {
				return nil, false
			}
			toks = append(toks, strconv.Itoa(found))
			cur = l[found]
		default:
			return nil, false
		}
	}
	return toks, true
}

func itemMatches(item any, pe fieldpath.PathElement) bool {
	if pe.Value != nil {
		return value.Equals(value.NewValueInterface(item), *pe.Value)
	}
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	for _, f := range *pe.Key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}

// pathPointer renders a structured-merge-diff path as a JSON pointer into
// obj, falling back to the path's own notation when an item is missing.
func pathPointer(obj map[string]any, p fieldpath.Path) string {
	if toks, ok := pathToTokens(obj, p); ok {
		return FormatPointer(toks)
	}
	return p.String()
}
