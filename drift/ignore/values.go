package ignore

import "strconv"

// ValueAt returns the value at toks (tokens of a parsed pointer) in a
// JSON document of maps and lists; false when a step is missing, a list
// index is out of range or the path runs through a scalar.
func ValueAt(doc any, toks []string) (any, bool) {
	cur := doc
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// SetAt writes value at toks, creating missing (or null) maps on the way;
// false, with nothing written, when a list index is out of range or a
// step is not a container. Lists are never grown: an index names an item
// that exists.
func SetAt(doc map[string]any, toks []string, value any) bool {
	if len(toks) == 0 || doc == nil {
		return false
	}
	var cur any = doc
	for i, t := range toks {
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[t] = value
				return true
			}
			next, ok := c[t]
			if !ok || next == nil {
				next = map[string]any{}
				c[t] = next
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) {
				return false
			}
			if last {
				c[n] = value
				return true
			}
			cur = c[n]
		default:
			return false
		}
	}
	return false
}
