package ignore

import (
	"bytes"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// NormalizeManaged applies the managedFieldsManagers of the Argo CD rules
// whose target selects config: every field that differs between live and
// config (typed comparison with tc) and that the live object's
// metadata.managedFields record as owned by one of those managers takes the
// live value in config. live is not modified. Matches name the fields, as
// pointers into live.
//
// Argo CD (util/argo/managedfields) selects the same fields and removes them
// from both objects; copying the live value into config gives the same diff
// while keeping both objects whole. Argo CD also skips normalization when an
// object cannot be typed; here that is an error, so the caller can say why
// a manager rule did not apply.
func (s *Set) NormalizeManaged(config, live *unstructured.Unstructured, tc managedfields.TypeConverter) ([]Match, error) {
	if config == nil || live == nil {
		return nil, nil // nothing to compare: creation or deletion
	}
	// Argo CD looks rules up by the desired object's group, kind, name and
	// namespace (util/argo/diff.preDiffNormalize).
	owner := map[string]*Rule{}
	for _, c := range s.rules {
		if c.rule.Tool != ArgoCD || len(c.managers) == 0 || !c.matches(config) {
			continue
		}
		for _, m := range c.rule.ManagedFieldsManagers {
			if _, ok := owner[m]; !ok {
				owner[m] = c.rule
			}
		}
	}
	if len(owner) == 0 {
		return nil, nil
	}
	if tc == nil {
		return nil, errors.New("managedFieldsManagers need a type converter")
	}
	typedLive, err := tc.ObjectToTyped(live)
	if err != nil {
		return nil, fmt.Errorf("typing live %s: %w", describe(live), err)
	}
	typedConfig, err := tc.ObjectToTyped(config)
	if err != nil {
		return nil, fmt.Errorf("typing desired %s: %w", describe(config), err)
	}
	cmp, err := typedLive.Compare(typedConfig)
	if err != nil {
		return nil, fmt.Errorf("comparing live and desired %s: %w", describe(config), err)
	}

	total := &fieldpath.Set{}
	var matches []Match
	seen := map[string]bool{}
	for _, mf := range live.GetManagedFields() {
		r, ok := owner[mf.Manager]
		if !ok || mf.FieldsV1 == nil {
			continue
		}
		owned := &fieldpath.Set{}
		if err := owned.FromJSON(bytes.NewReader(mf.FieldsV1.GetRawBytes())); err != nil {
			return nil, fmt.Errorf("reading managedFields of %s for manager %q: %w", describe(live), mf.Manager, err)
		}
		inter := owned.Intersection(cmp.Modified)
		if inter.Empty() {
			continue
		}
		for p := range inter.All() {
			ptr := pathPointer(live.Object, p)
			if !seen[ptr] {
				seen[ptr] = true
				matches = append(matches, Match{Pointer: ptr, Rule: r})
			}
		}
		total = total.Union(inter)
	}
	if total.Empty() {
		return nil, nil
	}
	adopted := typedLive.ExtractItems(total, typed.WithAppendKeyFields())
	merged, err := typedConfig.RemoveItems(total).Merge(adopted)
	if err != nil {
		return nil, fmt.Errorf("taking live values of managed fields into desired %s: %w", describe(config), err)
	}
	out, err := tc.TypedToObject(merged)
	if err != nil {
		return nil, fmt.Errorf("converting desired %s back: %w", describe(config), err)
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("converting desired %s back: got %T", describe(config), out)
	}
	config.Object = u.Object
	return matches, nil
}

// ownedPointers returns, for the managers a rule lists, the fields they own
// in obj as pointers: exact members, and leaves, which own everything below
// them (an atomic list or map, or a scalar).
func ownedPointers(obj *unstructured.Unstructured, managers map[string]bool) (members, leaves [][]string, err error) {
	for _, mf := range obj.GetManagedFields() {
		if !managers[mf.Manager] || mf.FieldsV1 == nil {
			continue
		}
		owned := &fieldpath.Set{}
		if err := owned.FromJSON(bytes.NewReader(mf.FieldsV1.GetRawBytes())); err != nil {
			return nil, nil, fmt.Errorf("reading managedFields of %s for manager %q: %w", describe(obj), mf.Manager, err)
		}
		for p := range owned.All() {
			if toks, ok := pathToTokens(obj.Object, p); ok {
				members = append(members, toks)
			}
		}
		for p := range owned.Leaves().All() {
			if toks, ok := pathToTokens(obj.Object, p); ok {
				leaves = append(leaves, toks)
			}
		}
	}
	return members, leaves, nil
}
