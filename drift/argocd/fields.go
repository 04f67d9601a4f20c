package argocd

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// FieldChange is one difference between the predicted live and the live
// object.
type FieldChange struct {
	// Pointer is the RFC 6901 JSON pointer of the field ("~" written "~0",
	// "/" written "~1"), the spelling of ignoreDifferences.jsonPointers. For
	// list items it uses the index in the live list.
	Pointer string
	// Desired is the predicted live value, Live the live one; each is only
	// meaningful when the matching Present flag is set.
	Desired, Live               any
	DesiredPresent, LivePresent bool
}

// Fields lists the differences between a predicted live object and a live
// object (a Result's two sides), sorted by pointer.
//
// Maps are compared key by key down to the leaves; a field present on one
// side only is reported once, with its whole value. Lists are reported whole,
// as Argo CD's JSON merge patch replaces them whole, except lists a built-in
// type merges by key (containers by name, ...): when both sides hold the same
// keys in the same order, their items are compared field by field.
func Fields(predictedLive, live *unstructured.Unstructured) []FieldChange {
	var d, l any
	var dOK, lOK bool
	var w fieldWalker
	if predictedLive != nil {
		d, dOK = plainJSON(predictedLive.Object), true
		w.root = structType(predictedLive)
	}
	if live != nil {
		l, lOK = plainJSON(live.Object), true
		if w.root == nil {
			w.root = structType(live)
		}
	}
	w.walk("", d, l, dOK, lOK, w.root)
	sort.Slice(w.out, func(i, j int) bool { return pointerLess(w.out[i].Pointer, w.out[j].Pointer) })
	return w.out
}

// structType returns the Go type whose struct tags carry the strategic merge
// metadata of obj's kind, or nil for kinds that are not built-in.
func structType(obj *unstructured.Unstructured) reflect.Type {
	v, err := newVersioned(obj.GroupVersionKind())
	if err != nil {
		return nil
	}
	return reflect.TypeOf(v)
}

// plainJSON returns v as decoded JSON with int64 integers, so that values
// from differently typed sources compare equal; v is returned unchanged when
// it does not encode.
func plainJSON(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		return v
	}
	return out
}

type fieldWalker struct {
	root reflect.Type
	out  []FieldChange
}

func (w *fieldWalker) walk(ptr string, d, l any, dOK, lOK bool, t reflect.Type) {
	if !dOK || !lOK {
		if dOK || lOK {
			w.out = append(w.out, FieldChange{Pointer: ptr, Desired: d, Live: l, DesiredPresent: dOK, LivePresent: lOK})
		}
		return
	}
	if reflect.DeepEqual(d, l) {
		return
	}
	dm, dIsMap := d.(map[string]any)
	lm, lIsMap := l.(map[string]any)
	if dIsMap && lIsMap {
		keys := make([]string, 0, len(dm)+len(lm))
		for k := range dm {
			keys = append(keys, k)
		}
		for k := range lm {
			if _, ok := dm[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			dv, dok := dm[k]
			lv, lok := lm[k]
			ct, meta := childType(t, k)
			child := ptr + "/" + escapePointer(k)
			if ds, ok := dv.([]any); ok {
				if ls, ok := lv.([]any); ok {
					w.walkList(child, ds, ls, ct, meta)
					continue
				}
			}
			w.walk(child, dv, lv, dok, lok, ct)
		}
		return
	}
	w.out = append(w.out, FieldChange{Pointer: ptr, Desired: d, Live: l, DesiredPresent: true, LivePresent: true})
}

// walkList compares two lists; t is the list's Go type and meta its strategic
// merge metadata.
func (w *fieldWalker) walkList(ptr string, d, l []any, t reflect.Type, meta strategicpatch.PatchMeta) {
	if reflect.DeepEqual(d, l) {
		return
	}
	key := meta.GetPatchMergeKey()
	if t != nil && key != "" && slices.Contains(meta.GetPatchStrategies(), "merge") {
		dk, dok := mergeKeys(d, key)
		lk, lok := mergeKeys(l, key)
		if dok && lok && reflect.DeepEqual(dk, lk) {
			elem := t
			for elem.Kind() == reflect.Pointer || elem.Kind() == reflect.Slice || elem.Kind() == reflect.Array {
				elem = elem.Elem()
			}
			for i := range l {
				w.walk(ptr+"/"+strconv.Itoa(i), d[i], l[i], true, true, elem)
			}
			return
		}
	}
	w.out = append(w.out, FieldChange{Pointer: ptr, Desired: d, Live: l, DesiredPresent: true, LivePresent: true})
}

// mergeKeys returns the merge key value of every item, or false when an item
// is not an object with a key or keys repeat.
func mergeKeys(items []any, key string) ([]any, bool) {
	keys := make([]any, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		k, ok := m[key]
		if !ok {
			return nil, false
		}
		for _, seen := range keys {
			if reflect.DeepEqual(seen, k) {
				return nil, false
			}
		}
		keys = append(keys, k)
	}
	return keys, true
}

// childType returns the Go type of field key of a value of type t and its
// strategic merge metadata; nil when unknown.
func childType(t reflect.Type, key string) (reflect.Type, strategicpatch.PatchMeta) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil, strategicpatch.PatchMeta{}
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem(), strategicpatch.PatchMeta{}
	case reflect.Struct:
		sub, meta, err := strategicpatch.PatchMetaFromStruct{T: t}.LookupPatchMetadataForStruct(key)
		if err != nil {
			return nil, strategicpatch.PatchMeta{}
		}
		ps, ok := sub.(strategicpatch.PatchMetaFromStruct)
		if !ok {
			return nil, meta
		}
		return ps.T, meta
	}
	return nil, strategicpatch.PatchMeta{}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pointerLess orders pointers token by token, numbers numerically, so that
// /a/2 sorts before /a/10.
func pointerLess(a, b string) bool {
	at, bt := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if at[i] == bt[i] {
			continue
		}
		an, aerr := strconv.Atoi(at[i])
		bn, berr := strconv.Atoi(bt[i])
		if aerr == nil && berr == nil {
			return an < bn
		}
		return at[i] < bt[i]
	}
	return len(at) < len(bt)
}
