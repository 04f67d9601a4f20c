package reconcile

import (
	"reflect"
	"strconv"

	"github.com/truce-dev/truce/drift/ignore"
)

// get returns the value at toks in doc.
func get(doc any, toks []string) (any, bool) { return ignore.ValueAt(doc, toks) }

// remove deletes the field at toks from doc; a missing field is no error.
// Removing a list item shifts the following ones.
func remove(doc map[string]any, toks []string) {
	if len(toks) == 0 {
		return
	}
	parent, ok := get(doc, toks[:len(toks)-1])
	if !ok {
		return
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		delete(p, last)
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(p) {
			return
		}
		grand, _ := get(doc, toks[:len(toks)-2])
		key := toks[len(toks)-2]
		shrunk := append(append([]any{}, p[:i]...), p[i+1:]...)
		switch g := grand.(type) {
		case map[string]any:
			g[key] = shrunk
		case []any:
			if j, err := strconv.Atoi(key); err == nil && j >= 0 && j < len(g) {
				g[j] = shrunk
			}
		}
	}
}

// set writes value at toks, creating maps on the way; it gives up (false)
// when a list index is out of range or a step is not a container.
func set(doc map[string]any, toks []string, value any) bool { return ignore.SetAt(doc, toks, value) }

// counterpart maps a pointer into live to the same field in payload: list
// items are matched by their "name" (the merge key of most keyed lists:
// containers, env, ports, volumes), by equal value for scalars, by index
// otherwise. ok is false when payload has no such item.
func counterpart(live, payload any, toks []string) ([]string, bool) {
	out := make([]string, 0, len(toks))
	l, p := live, payload
	for _, t := range toks {
		switch lc := l.(type) {
		case map[string]any:
			pm, ok := p.(map[string]any)
			if !ok {
				return append(out, toks[len(out):]...), len(out) == len(toks)
			}
			out = append(out, t)
			l, p = lc[t], pm[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(lc) {
				return nil, false
			}
			pl, _ := p.([]any)
			j := matchItem(lc[i], pl, i)
			if j < 0 {
				return nil, false
			}
			out = append(out, strconv.Itoa(j))
			l, p = lc[i], pl[j]
		default:
			return nil, false
		}
	}
	return out, true
}

func matchItem(item any, list []any, index int) int {
	if m, ok := item.(map[string]any); ok {
		if name, ok := m["name"]; ok {
			for j, o := range list {
				if om, ok := o.(map[string]any); ok && reflect.DeepEqual(om["name"], name) {
					return j
				}
			}
			return -1
		}
	} else {
		for j, o := range list {
			if reflect.DeepEqual(o, item) {
				return j
			}
		}
	}
	if index < len(list) {
		return index
	}
	return -1
}

func parse(pointer string) []string {
	toks, err := ignore.ParsePointer(pointer)
	if err != nil {
		return nil
	}
	return toks
}

// under reports whether pointer is p or inside it.
func under(pointer, p string) bool {
	return pointer == p || (len(pointer) > len(p) && pointer[:len(p)] == p && pointer[len(p)] == '/')
}
