package simulate

import (
	"strconv"

	"github.com/truce-dev/truce/drift/ignore"
)

// valueAt returns the value at a JSON pointer.
func valueAt(doc map[string]any, pointer string) (any, bool) {
	toks, err := ignore.ParsePointer(pointer)
	if err != nil {
		return nil, false
	}
	var cur any = doc
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

// setAt sets the value at a JSON pointer, creating missing maps on the
// way; it reports false when the path runs through something that is not
// a map or an existing list item.
func setAt(doc map[string]any, pointer string, value any) bool {
	toks, err := ignore.ParsePointer(pointer)
	if err != nil || len(toks) == 0 {
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

// removeAt deletes the map key at a JSON pointer; list items are not
// removed (that would shift the others).
func removeAt(doc map[string]any, pointer string) {
	toks, err := ignore.ParsePointer(pointer)
	if err != nil || len(toks) == 0 {
		return
	}
	parent := ignore.FormatPointer(toks[:len(toks)-1])
	var p any = doc
	if len(toks) > 1 {
		var ok bool
		if p, ok = valueAt(doc, parent); !ok {
			return
		}
	}
	if m, ok := p.(map[string]any); ok {
		delete(m, toks[len(toks)-1])
	}
}
