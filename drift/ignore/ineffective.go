package ignore

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ineffective reports rules, and entries of rules, that ignore nothing in
// objs: a target that selects none of them, a pointer or jq expression that
// reaches no field of any selected object (with the likely mistake: a "/"
// inside a key not written "~1", a list item named by an index that does not
// exist), and a manager that owns nothing. It also reports pointers that do
// work but name a list item by position, which breaks silently when the list
// changes. Pass the objects the rules are meant for, live objects when
// available: they carry the fields other writers add, and managedFields.
func (s *Set) Ineffective(objs []*unstructured.Unstructured) []Finding {
	var out []Finding
	for _, c := range s.rules {
		r := c.rule
		if r.Implied {
			continue
		}
		if len(r.JSONPointers)+len(r.JQPathExpressions)+len(r.ManagedFieldsManagers) == 0 {
			out = append(out, Finding{Rule: r, Kind: NoEffect, Message: "rule has no " + r.pointerField() + " and ignores nothing"})
			continue
		}
		var matched []*unstructured.Unstructured
		for _, o := range objs {
			if c.matches(o) {
				matched = append(matched, o)
			}
		}
		if len(matched) == 0 {
			out = append(out, Finding{Rule: r, Kind: NoEffect, Message: noTargetMessage(r, objs)})
			continue
		}
		for i, p := range r.JSONPointers {
			if f, ok := pointerFinding(r, p, c.pointers[i], matched); ok {
				out = append(out, f)
			}
		}
		for i, e := range r.JQPathExpressions {
			if f, ok := s.jqFinding(r, e, c.jqPaths[i], matched); ok {
				out = append(out, f)
			}
		}
		out = append(out, managerFindings(r, matched)...)
	}
	return out
}

func noTargetMessage(r *Rule, objs []*unstructured.Unstructured) string {
	msg := fmt.Sprintf("target %s matches none of the %d objects", r.Target, len(objs))
	switch r.Tool {
	case ArgoCD:
		if r.Target.Kind == "" {
			return msg + `: Argo CD needs a kind ("*" for every kind)`
		}
		if r.Target.Group == "" {
			kind, _ := compileGlob(r.Target.Kind)
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				if kind != nil && kind.MatchString(gvk.Kind) && gvk.Group != "" {
					return msg + fmt.Sprintf(": an empty group is the core group only, and %s is in group %q", gvk.Kind, gvk.Group)
				}
			}
		}
	case Flux:
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			for _, f := range []struct{ field, pattern, value string }{
				{"kind", r.Target.Kind, gvk.Kind},
				{"name", r.Target.Name, o.GetName()},
				{"group", r.Target.Group, gvk.Group},
				{"namespace", r.Target.Namespace, o.GetNamespace()},
			} {
				if f.pattern == "" {
					continue
				}
				re, err := regexp.Compile(f.pattern)
				if err == nil && re.MatchString(f.value) {
					anchored := regexp.MustCompile("^(?:" + f.pattern + ")$")
					if !anchored.MatchString(f.value) {
						return msg + fmt.Sprintf(": target fields are anchored regular expressions, so %s %q does not match %q", f.field, f.pattern, f.value)
					}
				}
			}
		}
	}
	return msg
}

// listStep is where a pointer addresses a list item by index.
type listStep struct {
	list  []string // tokens of the list
	index int
	item  any // nil when the index is out of range
}

func pointerFinding(r *Rule, p string, toks []string, matched []*unstructured.Unstructured) (Finding, bool) {
	if r.Tool == Flux && p == "" {
		return Finding{}, false // the whole resource
	}
	field := r.pointerField()
	found := false
	var step *listStep
	for _, o := range matched {
		if _, ok := resolve(o.Object, toks); ok {
			found = true
		}
		if st := findListStep(o.Object, toks); st != nil && (step == nil || step.item == nil) {
			step = st
		}
	}
	switch {
	case found && step != nil:
		msg := fmt.Sprintf("%s entry %q names a list item by position (item %d of %s): it ignores a different item, or nothing, once the list is reordered or grows",
			field, p, step.index, FormatPointer(step.list))
		if r.Tool == ArgoCD {
			if jq := contentSelector(toks, step); jq != "" {
				msg += fmt.Sprintf("; select the item by content instead: jqPathExpressions: [%q]", jq)
			} else {
				msg += "; select the item by content with jqPathExpressions instead"
			}
		}
		return Finding{Rule: r, Pointer: p, Kind: Fragile, Message: msg}, true
	case found:
		return Finding{}, false
	}
	if s := slashSuggestion(toks, matched); s != "" {
		return Finding{Rule: r, Pointer: p, Kind: NoEffect, Message: fmt.Sprintf(
			"%s entry %q has no effect: \"/\" inside a key must be written \"~1\" (did you mean %q?)", field, p, s)}, true
	}
	if step != nil || hasIndexToken(toks) {
		msg := fmt.Sprintf("%s entry %q has no effect: it names a list item by position and none of the %d objects the target matches has that item", field, p, len(matched))
		if r.Tool == ArgoCD {
			msg += "; select list items by content with jqPathExpressions"
		}
		return Finding{Rule: r, Pointer: p, Kind: NoEffect, Message: msg}, true
	}
	return Finding{Rule: r, Pointer: p, Kind: NoEffect, Message: fmt.Sprintf(
		"%s entry %q has no effect: none of the %d objects the target matches has this field", field, p, len(matched))}, true
}

// findListStep returns the first step of toks that indexes a list in obj.
func findListStep(obj map[string]any, toks []string) *listStep {
	var cur any = obj
	for i, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil {
				return nil
			}
			st := &listStep{list: toks[:i:i], index: n}
			if idx, ok := listIndex(t, len(c)); ok {
				st.index, st.item = idx, c[idx]
			}
			return st
		default:
			return nil
		}
	}
	return nil
}

func hasIndexToken(toks []string) bool {
	for _, t := range toks {
		if _, err := strconv.Atoi(t); err == nil {
			return true
		}
	}
	return false
}

// contentSelector writes the jq path expression that selects the same field
// by the list item's name, when it has one.
func contentSelector(toks []string, st *listStep) string {
	m, ok := st.item.(map[string]any)
	if !ok {
		return ""
	}
	name, ok := m["name"].(string)
	if !ok {
		return ""
	}
	quoted, _ := json.Marshal(name)
	expr := jqPath(st.list) + "[] | select(.name == " + string(quoted) + ")"
	if rest := toks[len(st.list)+1:]; len(rest) > 0 {
		expr += " | " + jqPath(rest)
	}
	return expr
}

var jqIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func jqPath(toks []string) string {
	if len(toks) == 0 {
		return "."
	}
	var b strings.Builder
	for _, t := range toks {
		if jqIdent.MatchString(t) {
			b.WriteString("." + t)
			continue
		}
		q, _ := json.Marshal(t)
		b.WriteString("[" + string(q) + "]")
	}
	s := b.String()
	if strings.HasPrefix(s, "[") {
		s = "." + s
	}
	return s
}

// Maps whose keys are commonly prefixed names with a "/".
var prefixedKeyMaps = map[string]bool{"annotations": true, "labels": true, "matchLabels": true, "nodeSelector": true}

var dnsPrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)

// slashSuggestion finds the pointer the user probably meant when a "/"
// inside a key was not escaped: first by finding such a key in a matched
// object, else when the pointer clearly continues into a prefixed key of
// annotations, labels and the like.
func slashSuggestion(toks []string, matched []*unstructured.Unstructured) string {
	for _, o := range matched {
		if s := joinToResolve(o.Object, toks); s != "" {
			return s
		}
	}
	for k := 1; k < len(toks)-1; k++ {
		if prefixedKeyMaps[toks[k-1]] || dnsPrefix.MatchString(toks[k]) {
			return FormatPointer(append(slices.Clip(toks[:k]), strings.Join(toks[k:], "/")))
		}
	}
	return ""
}

// joinToResolve walks toks through v; where a key is missing from a map it
// tries joining it with the following tokens with "/" and returns the
// resulting pointer if the whole path then resolves.
func joinToResolve(v any, toks []string) string {
	cur := v
	for i, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			if next, ok := c[t]; ok {
				cur = next
				continue
			}
			for j := i + 1; j < len(toks); j++ {
				key := strings.Join(toks[i:j+1], "/")
				next, ok := c[key]
				if !ok {
					continue
				}
				if _, ok := resolve(next, toks[j+1:]); ok {
					return FormatPointer(slices.Concat(toks[:i], []string{key}, toks[j+1:]))
				}
			}
			return ""
		case []any:
			idx, ok := listIndex(t, len(c))
			if !ok {
				return ""
			}
			cur = c[idx]
		default:
			return ""
		}
	}
	return ""
}

func (s *Set) jqFinding(r *Rule, expr string, code *gojq.Code, matched []*unstructured.Unstructured) (Finding, bool) {
	var firstErr error
	var failedOn *unstructured.Unstructured
	for _, o := range matched {
		var doc any
		b, err := json.Marshal(o)
		if err == nil {
			err = json.Unmarshal(b, &doc)
		}
		if err != nil {
			continue
		}
		paths, err := s.jqPaths(context.Background(), code, doc)
		if err != nil {
			if firstErr == nil {
				firstErr, failedOn = err, o
			}
			continue
		}
		for _, p := range paths {
			if _, ok := resolve(doc, p); ok {
				return Finding{}, false
			}
		}
	}
	if firstErr != nil {
		return Finding{Rule: r, Kind: NoEffect, Message: fmt.Sprintf(
			"jqPathExpressions entry %q has no effect: it fails on %s (%v), and Argo CD skips an expression that fails", expr, describe(failedOn), firstErr)}, true
	}
	return Finding{Rule: r, Kind: NoEffect, Message: fmt.Sprintf(
		"jqPathExpressions entry %q has no effect: it selects no field in the %d objects the target matches", expr, len(matched))}, true
}

func managerFindings(r *Rule, matched []*unstructured.Unstructured) []Finding {
	seen := map[string]bool{}
	hasManaged := false
	for _, o := range matched {
		for _, mf := range o.GetManagedFields() {
			hasManaged = true
			seen[mf.Manager] = true
		}
	}
	if !hasManaged {
		return nil // desired objects carry no managedFields: nothing to tell
	}
	var out []Finding
	for _, m := range r.ManagedFieldsManagers {
		if seen[m] {
			continue
		}
		names := make([]string, 0, len(seen))
		for n := range seen {
			names = append(names, n)
		}
		slices.Sort(names)
		out = append(out, Finding{Rule: r, Kind: NoEffect, Message: fmt.Sprintf(
			"managedFieldsManagers entry %q has no effect: it owns no field of the %d objects the target matches (their managers: %s)",
			m, len(matched), strings.Join(names, ", "))})
	}
	return out
}
