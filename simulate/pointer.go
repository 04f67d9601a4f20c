package simulate

import "github.com/truce-dev/truce/drift/ignore"

// valueAt returns the value at a JSON pointer.
func valueAt(doc map[string]any, pointer string) (any, bool) {
	toks, err := ignore.ParsePointer(pointer)
	if err != nil {
		return nil, false
	}
	return ignore.ValueAt(doc, toks)
}

// setAt sets the value at a JSON pointer, creating missing maps on the
// way; it reports false when the path runs through something that is not
// a map or an existing list item.
func setAt(doc map[string]any, pointer string, value any) bool {
	toks, err := ignore.ParsePointer(pointer)
	if err != nil {
		return false
	}
	return ignore.SetAt(doc, toks, value)
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
