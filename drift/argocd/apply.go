package argocd

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// WithLastApplied returns a copy of config carrying the
// last-applied-configuration annotation kubectl apply writes: the
// configuration itself, without that annotation.
func WithLastApplied(config *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := config.DeepCopy()
	bare := config.DeepCopy()
	if a := bare.GetAnnotations(); a != nil {
		delete(a, AnnotationLastAppliedConfig)
		if len(a) == 0 {
			a = nil
		}
		bare.SetAnnotations(a)
	}
	data, err := json.Marshal(bare.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding last-applied configuration: %w", err)
	}
	a := out.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationLastAppliedConfig] = string(data)
	out.SetAnnotations(a)
	return out, nil
}

// ClientSideApply returns the object kubectl apply (client-side, as Argo
// CD's default sync runs it) asks the server to store when applying config
// over live: live patched with the three-way merge of the previous
// last-applied configuration, config and live (a strategic merge patch for
// built-in kinds, a JSON merge patch otherwise, as custom resources take no
// strategic patch). changed is false when the patch is empty and kubectl
// sends nothing.
func ClientSideApply(config, live *unstructured.Unstructured) (patched *unstructured.Unstructured, changed bool, err error) {
	modified, err := WithLastApplied(config)
	if err != nil {
		return nil, false, err
	}
	var original []byte
	if s, ok := live.GetAnnotations()[AnnotationLastAppliedConfig]; ok {
		original = []byte(s)
	}
	modifiedJSON, err := json.Marshal(modified.Object)
	if err != nil {
		return nil, false, fmt.Errorf("encoding desired object: %w", err)
	}
	liveJSON, err := json.Marshal(live.Object)
	if err != nil {
		return nil, false, fmt.Errorf("encoding live object: %w", err)
	}
	var patch, out []byte
	if typed, err := newVersioned(config.GroupVersionKind()); err == nil {
		meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
		if err != nil {
			return nil, false, fmt.Errorf("reading patch metadata of %s: %w", config.GroupVersionKind(), err)
		}
		if patch, err = strategicpatch.CreateThreeWayMergePatch(original, modifiedJSON, liveJSON, meta, true); err != nil {
			return nil, false, fmt.Errorf("computing strategic merge patch: %w", err)
		}
		if string(patch) == "{}" {
			return live.DeepCopy(), false, nil
		}
		if out, err = strategicpatch.StrategicMergePatch(liveJSON, patch, typed); err != nil {
			return nil, false, fmt.Errorf("applying strategic merge patch: %w", err)
		}
	} else {
		if patch, err = jsonmergepatch.CreateThreeWayJSONMergePatch(original, modifiedJSON, liveJSON); err != nil {
			return nil, false, fmt.Errorf("computing JSON merge patch: %w", err)
		}
		if string(patch) == "{}" {
			return live.DeepCopy(), false, nil
		}
		if out, err = jsonpatch.MergePatch(liveJSON, patch); err != nil {
			return nil, false, fmt.Errorf("applying JSON merge patch: %w", err)
		}
	}
	obj, err := decodeObject(out)
	if err != nil {
		return nil, false, fmt.Errorf("decoding patched object: %w", err)
	}
	return obj, true, nil
}
