package ignore

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// IgnoredBy returns the first rule that ignores the field at pointer (an
// RFC 6901 pointer into obj, as a drift report names it), or nil. A rule
// ignores a field when it selects obj and one of its paths is the field or
// an ancestor of it: a jsonPointers/paths entry (a Flux "" path covers the
// whole object), a concrete path of a jqPathExpressions entry evaluated on
// obj, or a field that obj's managedFields record as owned by one of the
// rule's managedFieldsManagers (obj should then be the live object).
func (s *Set) IgnoredBy(obj *unstructured.Unstructured, pointer string) *Rule {
	target, err := ParsePointer(pointer)
	if err != nil || obj == nil {
		return nil
	}
	var doc any // obj as plain JSON, for jq; built once when needed
	for _, c := range s.rules {
		if !c.matches(obj) {
			continue
		}
		for _, toks := range c.pointers {
			if canon, ok := resolve(obj.Object, toks); ok {
				toks = canon
			}
			if hasPrefix(target, toks) {
				return c.rule
			}
		}
		for _, code := range c.jqPaths {
			if doc == nil {
				b, err := json.Marshal(obj)
				if err != nil || json.Unmarshal(b, &doc) != nil {
					doc = nil
					continue
				}
			}
			paths, err := s.jqPaths(context.Background(), code, doc)
			if err != nil {
				continue
			}
			for _, p := range paths {
				if canon, ok := resolve(doc, p); ok {
					p = canon
				}
				if hasPrefix(target, p) {
					return c.rule
				}
			}
		}
		if len(c.managers) > 0 {
			members, leaves, err := ownedPointers(obj, c.managers)
			if err != nil {
				continue
			}
			for _, m := range members {
				if len(m) == len(target) && hasPrefix(target, m) {
					return c.rule
				}
			}
			for _, l := range leaves {
				if hasPrefix(target, l) {
					return c.rule
				}
			}
		}
	}
	return nil
}
