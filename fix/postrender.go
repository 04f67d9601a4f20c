package fix

import (
	"fmt"

	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/render/world"
)

// postRenderer adds a strategic merge patch setting the stored values of
// fields to a HelmRelease's kustomize post-renderer (the first one, or a
// new one): for a field no value of the chart lands in, Helm's output is
// patched instead. The patch targets the object by kind and name, as
// rendered manifests often name no namespace.
func (e *editor) postRenderer(p Problem, t *world.ValuesTarget, fields []string, values map[string]any) error {
	ref := p.Object.Ref
	var original map[string]any
	if p.Object.Drift != nil {
		original = p.Object.Drift.Desired
	}
	set := map[string]any{}
	for _, ptr := range fields {
		set[ptr] = values[ptr]
	}
	patch, err := yamledit.StrategicPatch(ref.GroupVersion().String(), ref.Kind, ref.Name, "", set, original)
	if err != nil {
		return fmt.Errorf("writing a post-renderer patch for %s: %w", ref, err)
	}
	f, doc, err := e.doc(t.Source)
	if err != nil {
		return err
	}
	if t.Reason != "" {
		return fmt.Errorf("a post-renderer cannot be added: %s", t.Reason)
	}
	target := map[string]any{"kind": ref.Kind, "name": ref.Name}
	if ref.Group != "" {
		target["group"] = ref.Group
	}
	entry := map[string]any{"patch": string(patch), "target": target}
	if cur, ok, _ := f.Get(doc, t.PostRenderers); ok {
		list, _ := cur.([]any)
		for i, pr := range list {
			if m, _ := pr.(map[string]any); m != nil && m["kustomize"] != nil {
				return appendList(f, doc, fmt.Sprintf("%s/%d/kustomize/patches", t.PostRenderers, i), entry)
			}
		}
	}
	return appendList(f, doc, t.PostRenderers, map[string]any{"kustomize": map[string]any{"patches": []any{entry}}})
}
