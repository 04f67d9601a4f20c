package drift

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift/ignore"
)

// owners returns the field managers whose managedFields entries own the
// field at pointer in obj (or a field below it), formatted as
// "manager NAME (Operation)".
func owners(obj *unstructured.Unstructured, pointer string) []string {
	var out []string
	for _, mf := range FieldOwners(obj, pointer) {
		name := fmt.Sprintf("manager %s (%s)", mf.Manager, mf.Operation)
		if mf.Subresource != "" {
			name = fmt.Sprintf("manager %s (%s %s)", mf.Manager, mf.Operation, mf.Subresource)
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// FieldOwners returns the managedFields entries of obj that own the field
// at pointer (or a field below it). Keyed list items are matched by their
// key fields, set items by value, as FieldsV1 records them.
func FieldOwners(obj *unstructured.Unstructured, pointer string) []metav1.ManagedFieldsEntry {
	segments, err := splitPointer(pointer)
	if err != nil {
		return nil
	}
	var out []metav1.ManagedFieldsEntry
	for _, mf := range obj.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		if ownsPath(fields, obj.Object, segments) {
			out = append(out, mf)
		}
	}
	return out
}

func splitPointer(pointer string) ([]string, error) {
	if pointer == "/" {
		// admission.Diff's spelling of the whole document.
		return nil, nil
	}
	return ignore.ParsePointer(pointer)
}

// ownsPath walks a FieldsV1 tree along segments of a JSON pointer, reading
// list items from value to find their FieldsV1 key.
func ownsPath(fields map[string]any, value any, segments []string) bool {
	if len(segments) == 0 {
		return true
	}
	seg := segments[0]
	switch v := value.(type) {
	case map[string]any:
		child, ok := fields["f:"+seg].(map[string]any)
		if !ok {
			return false
		}
		return ownsPath(child, v[seg], segments[1:])
	case []any:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(v) {
			return false
		}
		item := v[i]
		for k, child := range fields {
			c, ok := child.(map[string]any)
			if !ok || !matchesListKey(k, item, i) {
				continue
			}
			if ownsPath(c, item, segments[1:]) {
				return true
			}
		}
	}
	return false
}

// matchesListKey reports whether a FieldsV1 list key ("k:{...}", "v:...",
// "i:N") names item at index.
func matchesListKey(key string, item any, index int) bool {
	switch {
	case strings.HasPrefix(key, "k:"):
		var want map[string]any
		if err := json.Unmarshal([]byte(key[2:]), &want); err != nil {
			return false
		}
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range want {
			if !reflect.DeepEqual(normalizeJSON(m[k]), normalizeJSON(v)) {
				return false
			}
		}
		return true
	case strings.HasPrefix(key, "v:"):
		var want any
		if err := json.Unmarshal([]byte(key[2:]), &want); err != nil {
			return false
		}
		return reflect.DeepEqual(normalizeJSON(item), normalizeJSON(want))
	case strings.HasPrefix(key, "i:"):
		return key[2:] == strconv.Itoa(index)
	}
	return false
}

// normalizeJSON gives numbers one type so that values decoded by different
// decoders compare equal.
func normalizeJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}
