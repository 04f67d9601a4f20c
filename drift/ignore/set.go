package ignore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/itchyny/gojq"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultJQTimeout is Argo CD's default limit for evaluating one
// jqPathExpressions entry (normalizers.DefaultJQExecutionTimeout).
const DefaultJQTimeout = time.Second

// Options tune a Set.
type Options struct {
	// JQTimeout bounds the evaluation of one jq expression on one object.
	// Zero means DefaultJQTimeout.
	JQTimeout time.Duration
}

// ErrJQTimeout is wrapped by the error Normalize returns when a jq
// expression ran out of time. Argo CD logs such a failure and skips the
// expression, so the object is still normalized as Argo CD would have it.
var ErrJQTimeout = errors.New("jq path expression timed out")

// Set is a compiled list of rules.
type Set struct {
	rules     []*compiled
	jqTimeout time.Duration
}

type compiled struct {
	rule     *Rule
	pointers [][]string // parsed JSONPointers; nil entry for Flux's ""
	flux     *jsondiff.SelectorRegex
	group    *regexp.Regexp // Argo CD globs
	kind     *regexp.Regexp
	jqDel    []*gojq.Code
	jqPaths  []*gojq.Code
	managers map[string]bool
}

// Compile validates and compiles rules. Errors name each rule's source.
// The Set keeps pointers to copies of the rules, reported in Matches and
// Findings.
func Compile(rules []Rule, opts Options) (*Set, error) {
	s := &Set{jqTimeout: opts.JQTimeout}
	if s.jqTimeout <= 0 {
		s.jqTimeout = DefaultJQTimeout
	}
	var errs []error
	for i := range rules {
		r := rules[i]
		r.JSONPointers = append([]string(nil), r.JSONPointers...)
		r.JQPathExpressions = append([]string(nil), r.JQPathExpressions...)
		r.ManagedFieldsManagers = append([]string(nil), r.ManagedFieldsManagers...)
		c, err := compileRule(&r)
		if err != nil {
			// One line per problem, each naming the rule.
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					errs = append(errs, fmt.Errorf("%s: %w", r.where(), e))
				}
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", r.where(), err))
			}
			continue
		}
		s.rules = append(s.rules, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func compileRule(r *Rule) (*compiled, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	c := &compiled{rule: r}
	for _, p := range r.JSONPointers {
		toks, _ := ParsePointer(p) // validated above
		c.pointers = append(c.pointers, toks)
	}
	var err error
	switch r.Tool {
	case Flux:
		if c.flux, err = jsondiff.NewSelectorRegex(fluxSelector(r.Target)); err != nil {
			return nil, err
		}
	case ArgoCD:
		if c.group, err = compileGlob(r.Target.Group); err != nil {
			return nil, err
		}
		if c.kind, err = compileGlob(r.Target.Kind); err != nil {
			return nil, err
		}
		for _, e := range r.JQPathExpressions {
			del, paths, err := compileJQ(e)
			if err != nil {
				return nil, err
			}
			c.jqDel = append(c.jqDel, del)
			c.jqPaths = append(c.jqPaths, paths)
		}
		c.managers = map[string]bool{}
		for _, m := range r.ManagedFieldsManagers {
			c.managers[m] = true
		}
	}
	return c, nil
}

// Rules returns the compiled rules in order.
func (s *Set) Rules() []*Rule {
	out := make([]*Rule, len(s.rules))
	for i, c := range s.rules {
		out[i] = c.rule
	}
	return out
}

// Matching returns the rules whose target selects obj.
func (s *Set) Matching(obj *unstructured.Unstructured) []*Rule {
	var out []*Rule
	for _, c := range s.rules {
		if c.matches(obj) {
			out = append(out, c.rule)
		}
	}
	return out
}

func (c *compiled) matches(obj *unstructured.Unstructured) bool {
	if obj == nil {
		return false
	}
	switch c.rule.Tool {
	case Flux:
		return c.flux.MatchUnstructured(obj)
	case ArgoCD:
		// util/argo/normalizers/diff_normalizer.go: glob on group and kind,
		// exact name and namespace when set.
		gk := obj.GroupVersionKind().GroupKind()
		t := c.rule.Target
		return c.group.MatchString(gk.Group) && c.kind.MatchString(gk.Kind) &&
			(t.Name == "" || t.Name == obj.GetName()) &&
			(t.Namespace == "" || t.Namespace == obj.GetNamespace())
	}
	return false
}

// Normalize removes the fields the matching rules ignore from obj, in place,
// and reports each removed field. Flux rules are applied as Flux does
// (jsondiff remove patches that tolerate missing paths; a "" path excludes
// the whole resource and is only reported). Argo CD rules are applied as
// Argo CD's ignore normalizer does: each jsonPointers entry is a JSON-patch
// remove that is skipped when it does not apply, each jqPathExpressions
// entry is del(EXPR) limited in time and skipped when it fails, and when any
// Argo CD rule matched, empty maps and lists are then dropped from the whole
// object (removeEmptyObjects).
//
// A jq expression that times out is skipped like Argo CD does, and an error
// wrapping ErrJQTimeout is returned with the otherwise normalized object.
// Other errors leave obj unchanged.
func (s *Set) Normalize(ctx context.Context, obj *unstructured.Unstructured) ([]Match, error) {
	if obj == nil {
		return nil, errors.New("normalize: nil object")
	}
	var flux, argo []*compiled
	for _, c := range s.rules {
		if !c.matches(obj) {
			continue
		}
		if c.rule.Tool == Flux {
			flux = append(flux, c)
		} else {
			argo = append(argo, c)
		}
	}
	var matches []Match
	if len(flux) > 0 {
		m, err := normalizeFlux(obj, flux)
		if err != nil {
			return nil, err
		}
		matches = append(matches, m...)
	}
	if len(argo) > 0 {
		m, err := s.normalizeArgo(ctx, obj, argo)
		matches = append(matches, m...)
		if err != nil {
			return matches, err
		}
	}
	return matches, nil
}

func normalizeFlux(obj *unstructured.Unstructured, rules []*compiled) ([]Match, error) {
	work := obj.DeepCopy()
	var matches []Match
	for _, c := range rules {
		for i, toks := range c.pointers {
			p := c.rule.JSONPointers[i]
			if p == jsondiff.IgnorePathRoot {
				matches = append(matches, Match{Pointer: "", Rule: c.rule})
				continue
			}
			canon, ok := resolve(work.Object, toks)
			if !ok {
				continue
			}
			// One operation at a time gives the same result as Flux's single
			// patch (operations apply in order) and tells us what went.
			if err := jsondiff.ApplyPatchToUnstructured(work, jsondiff.GenerateRemovePatch(p)); err != nil {
				return nil, fmt.Errorf("%s: removing %s %q: %w", c.rule.where(), c.rule.pointerField(), p, err)
			}
			matches = append(matches, Match{Pointer: FormatPointer(canon), Rule: c.rule})
		}
	}
	obj.Object = work.Object
	return matches, nil
}

func (s *Set) normalizeArgo(ctx context.Context, obj *unstructured.Unstructured, rules []*compiled) ([]Match, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", describe(obj), err)
	}
	var matches []Match
	var timeouts []error
	for _, c := range rules {
		for i, p := range c.rule.JSONPointers {
			patch, err := jsonpatch.DecodePatch(removeOp(p))
			if err != nil {
				return nil, fmt.Errorf("%s: jsonPointers[%d] %q: %w", c.rule.where(), i, p, err)
			}
			out, err := patch.Apply(doc)
			if err != nil {
				continue // Argo CD skips pointers that do not apply
			}
			canon := c.pointers[i]
			var before any
			if hasIndexToken(canon) && json.Unmarshal(doc, &before) == nil {
				if t, ok := resolve(before, canon); ok {
					canon = t
				}
			}
			doc = out
			matches = append(matches, Match{Pointer: FormatPointer(canon), Rule: c.rule})
		}
		for i, e := range c.rule.JQPathExpressions {
			out, removed, err := s.applyJQ(ctx, c.jqPaths[i], c.jqDel[i], doc)
			if err != nil {
				if errors.Is(err, ErrJQTimeout) {
					timeouts = append(timeouts, fmt.Errorf("%s: jqPathExpressions[%d] %q on %s: %w", c.rule.where(), i, e, describe(obj), err))
				}
				continue // as Argo CD: a failing expression is skipped
			}
			doc = out
			for _, p := range removed {
				matches = append(matches, Match{Pointer: p, Rule: c.rule})
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("decoding normalized %s: %w", describe(obj), err)
	}
	removeEmptyObjects(m)
	if doc, err = json.Marshal(m); err != nil {
		return nil, fmt.Errorf("encoding normalized %s: %w", describe(obj), err)
	}
	if err := obj.UnmarshalJSON(doc); err != nil {
		return nil, fmt.Errorf("decoding normalized %s: %w", describe(obj), err)
	}
	return matches, errors.Join(timeouts...)
}

func removeOp(pointer string) []byte {
	b, _ := json.Marshal([]map[string]string{{"op": "remove", "path": pointer}})
	return b
}

// applyJQ evaluates one expression on a JSON document: the concrete paths it
// selects (those that exist are reported as pointers) and del(EXPR).
func (s *Set) applyJQ(ctx context.Context, pathsCode, delCode *gojq.Code, doc []byte) ([]byte, []string, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, nil, err
	}
	paths, err := s.jqPaths(ctx, pathsCode, v)
	if err != nil {
		return nil, nil, err
	}
	var removed []string
	for _, p := range paths {
		if canon, ok := resolve(v, p); ok {
			removed = append(removed, FormatPointer(canon))
		}
	}
	out, err := s.runJQ(ctx, delCode, v)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, removed, nil
}

// jqPaths runs a compiled [path(EXPR)] and converts each path to tokens.
func (s *Set) jqPaths(ctx context.Context, code *gojq.Code, v any) ([][]string, error) {
	out, err := s.runJQ(ctx, code, v)
	if err != nil {
		return nil, err
	}
	list, ok := out.([]any)
	if !ok {
		return nil, fmt.Errorf("path expression returned %T, not a list of paths", out)
	}
	paths := make([][]string, 0, len(list))
	for _, p := range list {
		elems, ok := p.([]any)
		if !ok {
			return nil, fmt.Errorf("path expression returned %T, not a path", p)
		}
		toks := make([]string, len(elems))
		for i, e := range elems {
			switch e := e.(type) {
			case string:
				toks[i] = e
			case int:
				toks[i] = fmt.Sprint(e)
			case float64:
				toks[i] = fmt.Sprint(int64(e))
			default:
				// Slices and other non-addressable steps have no pointer.
				return nil, fmt.Errorf("path element %v cannot be written as a JSON pointer", e)
			}
		}
		paths = append(paths, toks)
	}
	return paths, nil
}

// runJQ returns the single result of code on v within the time limit, with
// Argo CD's rules: no result or several results are errors.
func (s *Set) runJQ(ctx context.Context, code *gojq.Code, v any) (any, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, s.jqTimeout)
	defer cancel()
	iter := code.RunWithContext(ctx, v)
	first, ok := iter.Next()
	if !ok {
		return nil, errors.New("jq expression returned no data")
	}
	if err, ok := first.(error); ok {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w after %v", ErrJQTimeout, s.jqTimeout)
		}
		return nil, err
	}
	if _, ok := iter.Next(); ok {
		return nil, errors.New("jq expression returned multiple results")
	}
	return first, nil
}

// removeEmptyObjects drops empty maps, and lists that end up empty, at any
// depth; map items of lists that end up empty are dropped too. This is
// Argo CD's post-normalization step, copied in behaviour.
func removeEmptyObjects(obj map[string]any) {
	for key, value := range obj {
		switch v := value.(type) {
		case map[string]any:
			removeEmptyObjects(v)
			if len(v) == 0 {
				delete(obj, key)
			}
		case []any:
			cleaned := make([]any, 0, len(v))
			for _, item := range v {
				if m, ok := item.(map[string]any); ok {
					removeEmptyObjects(m)
					if len(m) == 0 {
						continue
					}
				}
				cleaned = append(cleaned, item)
			}
			if len(cleaned) != len(v) {
				obj[key] = cleaned
			}
			if len(cleaned) == 0 {
				delete(obj, key)
			}
		}
	}
}

func describe(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "<nil>"
	}
	s := obj.GetKind()
	if ns := obj.GetNamespace(); ns != "" {
		return s + " " + ns + "/" + obj.GetName()
	}
	return s + " " + obj.GetName()
}
