package argocd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// withSchemeDefaults applies the scheme defaults of typed (data decoded into
// its Go struct) to data. The defaults are computed on the struct and applied
// as a two-way strategic merge patch, so fields unknown to the struct stay;
// the result is re-encoded through a map so keys are sorted the same way on
// both sides of the byte comparison (gitops-engine pkg/diff/diff.go
// generateSchemeDefaultPatch and applyPatch).
func withSchemeDefaults(data []byte, typed runtime.Object) ([]byte, error) {
	defaulted := typed.DeepCopyObject()
	defaultsScheme.Default(defaulted)

	// Stored objects come defaulted: then the two encodings are equal and
	// the patch is "{}" without computing it.
	patch := []byte("{}")
	if !reflect.DeepEqual(typed, defaulted) {
		var err error
		if patch, err = defaultsPatch(typed, defaulted); err != nil {
			return nil, err
		}
	}
	patched, err := strategicpatch.StrategicMergePatch(data, patch, typed.DeepCopyObject())
	if err != nil {
		return nil, fmt.Errorf("applying defaults patch: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(patched, &m); err != nil {
		return nil, fmt.Errorf("decoding defaulted object: %w", err)
	}
	return json.Marshal(m)
}

// defaultsPatch is the two-way strategic merge patch from typed to
// defaulted.
func defaultsPatch(typed, defaulted runtime.Object) ([]byte, error) {
	before, err := json.Marshal(typed)
	if err != nil {
		return nil, fmt.Errorf("encoding object: %w", err)
	}
	after, err := json.Marshal(defaulted)
	if err != nil {
		return nil, fmt.Errorf("encoding defaulted object: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, typed.DeepCopyObject())
	if err != nil {
		return nil, fmt.Errorf("computing defaults patch: %w", err)
	}
	return patch, nil
}

// remarshal re-encodes an object through its Go struct when it is a built-in
// type, so both sides use the API server's formatting (canonical quantities,
// no empty omitempty fields), keeping only the fields the input had. Objects
// with fields the struct does not know are returned unchanged apart from
// number types (gitops-engine pkg/diff/diff.go remarshal).
func remarshal(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	plain, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	item, err := newVersioned(plain.GroupVersionKind())
	if err != nil {
		return plain, nil
	}
	typed := reflect.New(reflect.TypeOf(item).Elem()).Interface()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(typed); err != nil {
		return plain, nil
	}
	body, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return plain, nil
	}
	return &unstructured.Unstructured{Object: removeMapFields(plain.Object, body)}, nil
}

// removeMapFields returns live restricted to the keys config has, recursively;
// list items beyond config's length are kept so that they show in the diff
// (gitops-engine pkg/utils/json/json.go RemoveMapFields).
func removeMapFields(config, live map[string]any) map[string]any {
	out := make(map[string]any, len(config))
	for k, c := range config {
		l, ok := live[k]
		if !ok {
			continue
		}
		if l != nil {
			l = removeFields(c, l)
		}
		out[k] = l
	}
	return out
}

func removeListFields(config, live []any) []any {
	out := make([]any, 0, len(live))
	for i, l := range live {
		if i < len(config) && l != nil {
			l = removeFields(config[i], l)
		}
		out = append(out, l)
	}
	return out
}

func removeFields(config, live any) any {
	switch c := config.(type) {
	case map[string]any:
		if l, ok := live.(map[string]any); ok {
			return removeMapFields(c, l)
		}
	case []any:
		if l, ok := live.([]any); ok {
			return removeListFields(c, l)
		}
	}
	return live
}
