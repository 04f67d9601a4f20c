package ignore

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Paths lists the concrete fields the rules that select obj ignore in it,
// one Match per field, each pointer resolved against obj: jsonPointers and
// Flux paths as written (list indexes made canonical when the field
// exists, kept as written when it does not), jqPathExpressions evaluated on
// obj, and the fields obj's managedFields record as owned by a rule's
// managedFieldsManagers (exact leaves). A Flux "" path yields a Match with
// an empty Pointer: the whole object. Duplicates are dropped, the first
// rule naming a field kept.
//
// A reconciler calls it on the live object to know which fields to leave
// to their other writers.
//
// selectBy is the object the rules' targets are matched against (nil: obj
// itself): a reconciler passes what Git says, so that labels and
// annotations other writers added in the cluster do not select rules.
func (s *Set) Paths(ctx context.Context, selectBy, obj *unstructured.Unstructured) ([]Match, error) {
	if selectBy == nil {
		selectBy = obj
	}
	if obj == nil {
		return nil, nil
	}
	var out []Match
	seen := map[string]bool{}
	add := func(toks []string, r *Rule) {
		p := FormatPointer(toks)
		if !seen[p] {
			seen[p] = true
			out = append(out, Match{Pointer: p, Rule: r})
		}
	}
	var doc any
	for _, c := range s.rules {
		if !c.matches(selectBy) {
			continue
		}
		for i, toks := range c.pointers {
			if c.rule.Tool == Flux && c.rule.JSONPointers[i] == "" {
				if !seen[""] {
					seen[""] = true
					out = append(out, Match{Pointer: "", Rule: c.rule})
				}
				continue
			}
			if canon, ok := resolve(obj.Object, toks); ok {
				toks = canon
			}
			add(toks, c.rule)
		}
		for i, code := range c.jqPaths {
			if doc == nil {
				b, err := json.Marshal(obj)
				if err != nil {
					return nil, fmt.Errorf("encoding %s: %w", describe(obj), err)
				}
				if err := json.Unmarshal(b, &doc); err != nil {
					return nil, fmt.Errorf("decoding %s: %w", describe(obj), err)
				}
			}
			paths, err := s.jqPaths(ctx, code, doc)
			if err != nil {
				return out, fmt.Errorf("%s: jqPathExpressions %q: %w", c.rule.where(), c.rule.JQPathExpressions[i], err)
			}
			for _, p := range paths {
				if canon, ok := resolve(doc, p); ok {
					p = canon
				}
				add(p, c.rule)
			}
		}
		if len(c.managers) > 0 {
			_, leaves, err := ownedPointers(obj, c.managers)
			if err != nil {
				return out, err
			}
			for _, l := range leaves {
				add(l, c.rule)
			}
		}
	}
	return out, nil
}
