package appset

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// applyPatch applies a templated templatePatch to an Application as
// Argo CD's template.applyTemplatePatch does: a strategic merge patch
// with the Application's Go type as schema, which marks no field but
// metadata's (finalizers merge, for one) so that maps merge and lists
// are replaced; the project cannot be changed.
func applyPatch(app map[string]any, patch string) (map[string]any, error) {
	raw, err := yaml.YAMLToJSON([]byte(patch))
	if err != nil {
		return nil, fmt.Errorf("error while converting template to json %q: %w", patch, err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("invalid templatePatch %q: %w", raw, err)
	}
	// The merge writes into app.
	project, _, _ := unstructured.NestedString(app, "spec", "project")
	out, err := strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(app, p, applicationSchema{})
	if err != nil {
		return nil, fmt.Errorf("error while applying templatePatch template to json %q: %w", raw, err)
	}
	if spec, ok := out["spec"].(map[string]any); ok {
		if project == "" {
			delete(spec, "project")
		} else {
			spec["project"] = project
		}
	}
	return out, nil
}

// applicationSchema is the patch schema of an Application below its
// metadata: no field has a patch strategy.
type applicationSchema struct{ below bool }

func (s applicationSchema) LookupPatchMetadataForStruct(key string) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	if !s.below && key == "metadata" {
		meta, err := strategicpatch.NewPatchMetaFromStruct(metav1.ObjectMeta{})
		return meta, strategicpatch.PatchMeta{}, err
	}
	return applicationSchema{below: true}, strategicpatch.PatchMeta{}, nil
}

func (s applicationSchema) LookupPatchMetadataForSlice(key string) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	return s.LookupPatchMetadataForStruct(key)
}

func (applicationSchema) Name() string { return "Application" }
