package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// maxJSONPatchOperations is the patch handler's limit on the operations of
// a JSON patch.
const maxJSONPatchOperations = 10000

// patchObject applies a strategic merge, JSON merge or JSON patch to the
// stored object, as the server's patch handler does before admission
// (k8s.io/apiserver/pkg/endpoints/handlers/patch.go): the patch is applied
// to the stored object in the request's version, and the result decoded
// (with defaulting) like a body.
func (c *Chain) patchObject(ctx context.Context, w writeRequest, cd codec, old runtime.Object) (runtime.Object, error) {
	current, err := cd.encode(old.DeepCopyObject(), w.resource.GVK())
	if err != nil {
		return nil, fmt.Errorf("encoding the stored object: %w", err)
	}
	var patched map[string]any
	switch w.patchType {
	case types.JSONPatchType, types.MergePatchType:
		currentJSON, err := json.Marshal(current.Object)
		if err != nil {
			return nil, err
		}
		out, err := applyJSONPatch(w.patchType, w.patch, currentJSON)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(out, &patched); err != nil {
			return nil, invalidPatch(string(out), err)
		}
	case types.StrategicMergePatchType:
		if w.resource.CRD != nil {
			// Custom resources have no patch strategies; the handler
			// does not accept the media type for them.
			return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", k8sschema.GroupResource{}, "",
				fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s",
					types.JSONPatchType, types.MergePatchType, types.ApplyYAMLPatchType), 0, false)
		}
		patchMap := map[string]any{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(w.patch, &patchMap); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		schemaObj, err := schemeFor(w.resource.GVR.Group).New(w.resource.GVK())
		if err != nil {
			return nil, err
		}
		if patched, err = strategicpatch.StrategicMergeMapPatch(current.Object, patchMap, schemaObj); err != nil {
			return nil, interpretStrategicMergePatchError(err)
		}
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unknown patch type %q", w.patchType))
	}
	obj, err := cd.decode(ctx, &unstructured.Unstructured{Object: patched}, w.fieldValidation)
	if err != nil {
		if apierrors.IsBadRequest(err) {
			// The handler reports a patched object it cannot decode as an
			// invalid patch.
			out, _ := json.Marshal(patched)
			return nil, invalidPatch(string(out), err)
		}
		return nil, err
	}
	return obj, nil
}

// applyJSONPatch is the JSON patcher's applyJSPatch.
func applyJSONPatch(pt types.PatchType, patch, current []byte) ([]byte, error) {
	if pt == types.MergePatchType {
		v := map[string]any{}
		if _, err := kjson.UnmarshalStrict(patch, &v); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		out, err := jsonpatch.MergePatch(current, patch)
		if err == jsonpatch.ErrBadJSONPatch {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, err
	}
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(ops) > maxJSONPatchOperations {
		return nil, apierrors.NewRequestEntityTooLargeError(
			fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
	}
	out, err := ops.Apply(current)
	if err != nil {
		return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", k8sschema.GroupResource{}, "", err.Error(), 0, false)
	}
	return out, nil
}

// invalidPatch is the handler's answer for a patched object it cannot
// decode.
func invalidPatch(patched string, err error) error {
	return apierrors.NewInvalid(k8sschema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), patched, err.Error()),
	})
}

// interpretStrategicMergePatchError is the handler's mapping of
// strategic merge patch errors to status codes.
func interpretStrategicMergePatchError(err error) error {
	switch err {
	case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys,
		mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
		return apierrors.NewBadRequest(err.Error())
	case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", k8sschema.GroupResource{}, "", err.Error(), 0, false)
	}
	return err
}

// ParsePatchType reads kubectl patch's --type: strategic, merge or json.
func ParsePatchType(s string) (types.PatchType, error) {
	switch s {
	case "strategic", "":
		return types.StrategicMergePatchType, nil
	case "merge":
		return types.MergePatchType, nil
	case "json":
		return types.JSONPatchType, nil
	}
	return "", fmt.Errorf("unknown patch type %q (want strategic, merge or json)", s)
}
