package ignore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/itchyny/gojq"
)

// Tool is the GitOps tool whose semantics a rule follows.
type Tool string

const (
	// Flux rules come from a Kustomization's .spec.ignore.
	Flux Tool = "Flux"
	// ArgoCD rules come from an Application's ignoreDifferences, argocd-cm
	// resource overrides or a resource's ignore-differences annotation.
	ArgoCD Tool = "ArgoCD"
)

// Target names the resources a rule applies to. For Flux every field is
// optional and Group, Version, Kind, Name and Namespace are anchored regular
// expressions; LabelSelector and AnnotationSelector use label selector
// syntax. For Argo CD, Group and Kind are globs (an empty Group is the core
// group), Name and Namespace match exactly when set, and the other fields
// must be empty.
type Target struct {
	Group, Version, Kind, Name, Namespace, LabelSelector, AnnotationSelector string
}

// IsZero reports whether no field is set (for Flux: every resource).
func (t Target) IsZero() bool { return t == Target{} }

func (t Target) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+": "+v)
		}
	}
	add("group", t.Group)
	add("version", t.Version)
	add("kind", t.Kind)
	add("name", t.Name)
	add("namespace", t.Namespace)
	add("labelSelector", t.LabelSelector)
	add("annotationSelector", t.AnnotationSelector)
	return "{" + strings.Join(parts, ", ") + "}"
}

// Rule is one ignore rule as the user wrote it.
type Rule struct {
	Tool
	// Source is the file:line of the object the rule was written in.
	Source string
	// Field is where in that object the rule sits, for messages, e.g.
	// "spec.ignoreDifferences[1]" or "data[resource.customizations.ignoreDifferences.all]".
	Field  string
	Target Target
	// JSONPointers are RFC 6901 pointers (Flux calls them paths).
	JSONPointers []string
	// JQPathExpressions are jq path expressions (Argo CD only).
	JQPathExpressions []string
	// ManagedFieldsManagers are field manager names (Argo CD only).
	ManagedFieldsManagers []string
	// Implied marks a rule the tool applies by itself (Argo CD ignoring
	// status); it is never reported as doing nothing.
	Implied bool
}

// String names the rule by its provenance: "file:line: field".
func (r *Rule) String() string { return r.where() }

// where prefixes messages with the rule's provenance.
func (r *Rule) where() string {
	switch {
	case r.Source != "" && r.Field != "":
		return r.Source + ": " + r.Field
	case r.Source != "":
		return r.Source
	case r.Field != "":
		return r.Field
	}
	return "ignore rule"
}

// pointerField is what the tool calls the list of JSON pointers.
func (r *Rule) pointerField() string {
	if r.Tool == Flux {
		return "paths"
	}
	return "jsonPointers"
}

// Validate checks the rule on its own, as the tool would when loading it.
// Messages name the offending field relative to the rule (e.g.
// "jqPathExpressions[1]"); callers add the rule's provenance.
func (r *Rule) Validate() error {
	var errs []error
	switch r.Tool {
	case Flux:
		if len(r.JQPathExpressions) > 0 {
			errs = append(errs, errors.New("jqPathExpressions: Flux ignore rules only have paths"))
		}
		if len(r.ManagedFieldsManagers) > 0 {
			errs = append(errs, errors.New("managedFieldsManagers: Flux ignore rules only have paths"))
		}
		if _, err := jsondiff.NewSelectorRegex(fluxSelector(r.Target)); err != nil {
			errs = append(errs, fmt.Errorf("target: %w", err))
		}
	case ArgoCD:
		if r.Target.Version != "" || r.Target.LabelSelector != "" || r.Target.AnnotationSelector != "" {
			errs = append(errs, errors.New("target: version, labelSelector and annotationSelector are not supported by Argo CD ignoreDifferences (group, kind, name and namespace only)"))
		}
		if _, err := compileGlob(r.Target.Group); err != nil {
			errs = append(errs, fmt.Errorf("group: %w", err))
		}
		if _, err := compileGlob(r.Target.Kind); err != nil {
			errs = append(errs, fmt.Errorf("kind: %w", err))
		}
		for i, e := range r.JQPathExpressions {
			if _, _, err := compileJQ(e); err != nil {
				errs = append(errs, fmt.Errorf("jqPathExpressions[%d] %q: %w", i, e, err))
			}
		}
		for i, m := range r.ManagedFieldsManagers {
			if m == "" {
				errs = append(errs, fmt.Errorf("managedFieldsManagers[%d]: empty manager name", i))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("unknown tool %q (want %q or %q)", r.Tool, Flux, ArgoCD))
	}
	for i, p := range r.JSONPointers {
		if p == "" {
			if r.Tool == Flux {
				continue // jsondiff.IgnorePathRoot: the whole resource
			}
			errs = append(errs, fmt.Errorf("%s[%d]: JSON pointer \"\" must start with \"/\" (Argo CD cannot remove the whole object)", r.pointerField(), i))
			continue
		}
		if _, err := ParsePointer(p); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", r.pointerField(), i, err))
		}
	}
	return errors.Join(errs...)
}

func fluxSelector(t Target) *jsondiff.Selector {
	if t.IsZero() {
		return nil
	}
	return &jsondiff.Selector{
		Group:              t.Group,
		Version:            t.Version,
		Kind:               t.Kind,
		Name:               t.Name,
		Namespace:          t.Namespace,
		LabelSelector:      t.LabelSelector,
		AnnotationSelector: t.AnnotationSelector,
	}
}

// FluxRules converts the Flux rules among rules into the form
// github.com/fluxcd/pkg/ssa takes, unchanged, so that the Flux strategy gets
// Flux's own matching. Rules of other tools are skipped.
func FluxRules(rules []Rule) []jsondiff.IgnoreRule {
	var out []jsondiff.IgnoreRule
	for _, r := range rules {
		if r.Tool != Flux {
			continue
		}
		out = append(out, jsondiff.IgnoreRule{
			Paths:    append([]string(nil), r.JSONPointers...),
			Selector: fluxSelector(r.Target),
		})
	}
	return out
}

// compileJQ compiles a jqPathExpressions entry the way Argo CD does, as
// del(EXPR), and also as [path(EXPR)] to learn which concrete paths it
// selects. EXPR must parse on its own so that wrapping it cannot change
// its meaning.
func compileJQ(expr string) (del, paths *gojq.Code, err error) {
	if _, err := gojq.Parse(expr); err != nil {
		return nil, nil, err
	}
	dq, err := gojq.Parse("del(" + expr + ")")
	if err != nil {
		return nil, nil, err
	}
	if del, err = gojq.Compile(dq); err != nil {
		return nil, nil, err
	}
	pq, err := gojq.Parse("[path(" + expr + ")]")
	if err != nil {
		return nil, nil, err
	}
	if paths, err = gojq.Compile(pq); err != nil {
		return nil, nil, err
	}
	return del, paths, nil
}

// Match says that a rule removed (or, for NormalizeManaged, handed over to
// the live value) the field at Pointer. Pointer "" with a Flux rule means
// the whole resource is excluded from drift detection.
type Match struct {
	Pointer string
	Rule    *Rule
}

// FindingKind says how a rule falls short.
type FindingKind string

const (
	// NoEffect: the rule, or one of its entries, ignores nothing.
	NoEffect FindingKind = "NoEffect"
	// Fragile: the entry works today but names a list item by position.
	Fragile FindingKind = "Fragile"
)

// Finding reports a rule, or one entry of it, that does nothing or works
// only by accident.
type Finding struct {
	Rule *Rule
	// Pointer is the jsonPointers/paths entry concerned, if any.
	Pointer string
	Kind    FindingKind
	Message string
}

func (f Finding) String() string { return f.Rule.where() + ": " + f.Message }
