package manifest

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Object is one Kubernetes object together with where it was written.
type Object struct {
	// Source is the file and the line the object starts on: the first line
	// of its document's content, or of its entry in a List's items.
	Source Source
	// Object holds the decoded object. Numbers are int64 or float64 and
	// scalars are typed exactly as kubectl would type them.
	Object *unstructured.Unstructured
	// Raw is the object as JSON, the same bytes kubectl would send to the
	// API server for it (modulo key order and whitespace).
	Raw []byte
}

// emit turns the JSON of one document into Objects, flattening Lists.
// itemLines holds the file line of every element of the document's items,
// when known.
func (d *decoder) emit(src Source, raw []byte, itemLines []int) {
	var v any
	// utiljson is what unstructured.Unstructured uses, so integers stay
	// int64 and everything else float64, as with kubectl.
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		d.fail(newError(src, ErrInvalidObject, "cannot decode document: "+err.Error()))
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		d.fail(newError(src, ErrInvalidObject, fmt.Sprintf(
			"document is %s, not a mapping; a Kubernetes object must be a mapping with apiVersion, kind and metadata",
			describeJSON(v))))
		return
	}
	if msg := checkTypeMeta(obj); msg != "" {
		d.fail(newError(src, ErrInvalidObject, msg))
		return
	}
	kind := obj["kind"].(string)
	items, isList := obj["items"]
	if !isList || !strings.HasSuffix(kind, "List") {
		if msg := checkName(obj); msg != "" {
			d.fail(newError(src, ErrInvalidObject, msg))
			return
		}
		d.objs = append(d.objs, Object{Source: src, Object: &unstructured.Unstructured{Object: obj}, Raw: raw})
		return
	}
	d.emitList(src, obj, items, itemLines)
}

// emitList flattens a List into its items, the way kubectl's
// FlattenListVisitor does, inferring a missing kind and apiVersion of an
// item from a typed list (ConfigMapList -> ConfigMap) like
// unstructured.UnstructuredList does.
func (d *decoder) emitList(src Source, list map[string]any, items any, itemLines []int) {
	kind := list["kind"].(string)
	var elems []any
	switch items := items.(type) {
	case nil:
	case []any:
		elems = items
	default:
		d.fail(newError(src, ErrInvalidObject, fmt.Sprintf("%s: items is %s, not a sequence", kind, describeJSON(items))))
		return
	}
	if !d.countDocuments(src, len(elems)) {
		return
	}
	if len(itemLines) != len(elems) {
		itemLines = nil // e.g. items came in through a merge key
	}
	for i, elem := range elems {
		itemSrc := src
		if itemLines != nil {
			itemSrc.Line = itemLines[i]
		}
		obj, ok := elem.(map[string]any)
		if !ok {
			d.fail(newError(itemSrc, ErrInvalidObject, fmt.Sprintf(
				"%s item %d is %s, not a mapping", kind, i, describeJSON(elem))))
			continue
		}
		if itemKind := strings.TrimSuffix(kind, "List"); itemKind != "" && isUnset(obj, "kind") && isUnset(obj, "apiVersion") {
			obj["kind"] = itemKind
			obj["apiVersion"] = list["apiVersion"]
		}
		msg := checkTypeMeta(obj)
		if msg == "" {
			msg = checkName(obj)
		}
		if msg != "" {
			d.fail(newError(itemSrc, ErrInvalidObject, fmt.Sprintf("%s item %d: %s", kind, i, msg)))
			continue
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			d.fail(newError(itemSrc, ErrInvalidObject, fmt.Sprintf("%s item %d: cannot encode as JSON: %v", kind, i, err)))
			continue
		}
		d.objs = append(d.objs, Object{Source: itemSrc, Object: &unstructured.Unstructured{Object: obj}, Raw: raw})
	}
}

// isUnset reports whether obj[field] is absent, null or "".
func isUnset(obj map[string]any, field string) bool {
	v, ok := obj[field]
	if !ok || v == nil {
		return true
	}
	s, isString := v.(string)
	return isString && s == ""
}

// checkTypeMeta returns a description of what is wrong with obj's
// apiVersion and kind, or "".
func checkTypeMeta(obj map[string]any) string {
	for _, field := range []string{"apiVersion", "kind"} {
		v, ok := obj[field]
		if !ok || v == nil {
			return "missing " + field
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Sprintf("%s must be a string, found %s", field, describeJSON(v))
		}
		if s == "" {
			return field + " is empty"
		}
	}
	return ""
}

// checkName returns a description of what is wrong with obj's
// metadata.name, or "". An object may omit the name when it sets
// metadata.generateName, as kubectl create accepts.
func checkName(obj map[string]any) string {
	kind := obj["kind"].(string)
	mv, ok := obj["metadata"]
	if !ok || mv == nil {
		return kind + " is missing metadata.name"
	}
	meta, ok := mv.(map[string]any)
	if !ok {
		return fmt.Sprintf("%s: metadata must be a mapping, found %s", kind, describeJSON(mv))
	}
	for _, field := range []string{"name", "generateName"} {
		v, ok := meta[field]
		if !ok || v == nil {
			continue
		}
		s, isString := v.(string)
		if !isString {
			return fmt.Sprintf("%s: metadata.%s must be a string, found %s", kind, field, describeJSON(v))
		}
		if s != "" {
			return ""
		}
	}
	return kind + " is missing metadata.name (and has no metadata.generateName)"
}

// describeJSON names the JSON type of v for error messages.
func describeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a sequence"
	case string:
		return fmt.Sprintf("a string (%q)", truncate(v, 40))
	case bool:
		return fmt.Sprintf("a boolean (%t)", v)
	case int64, float64, json.Number:
		return fmt.Sprintf("a number (%v)", v)
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
