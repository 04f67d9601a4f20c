package jsonnet

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/truce-dev/truce/manifest"
)

// decodeOutput turns the program's JSON output into objects the way Argo CD
// does, with the same types: first as an array of objects, else as one
// object, every object needing a kind; then Lists are replaced by their
// items and Lists whose items are null dropped (reposerver's
// GenerateManifests). The result goes through manifest.Decode for the
// checks and limits every object truce reads gets.
func decodeOutput(src manifest.Source, out string, opts manifest.Options) ([]manifest.Object, error) {
	var objs []*unstructured.Unstructured
	if err := json.Unmarshal([]byte(out), &objs); err != nil {
		var obj unstructured.Unstructured
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			return nil, fileError(src, ErrOutput, fmt.Sprintf(
				"the output is %s; Argo CD needs an object or an array of objects, each with a kind: %v", describe(out), err))
		}
		objs = []*unstructured.Unstructured{&obj}
	}

	var targets []map[string]any
	for _, obj := range objs {
		switch {
		case obj == nil:
			// null elements of the array; Argo CD skips them.
		case obj.IsList():
			err := obj.EachListItem(func(item runtime.Object) error {
				targets = append(targets, item.(*unstructured.Unstructured).Object)
				return nil
			})
			if err != nil {
				return nil, fileError(src, ErrOutput, fmt.Sprintf("%s %q: %v", obj.GetKind(), obj.GetName(), err))
			}
		case isNullList(obj):
		default:
			targets = append(targets, obj.Object)
		}
	}

	// One object a line: an error's line in this stream is the object's
	// position in the output.
	var stream bytes.Buffer
	for _, t := range targets {
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, fileError(src, ErrOutput, "cannot encode the output as JSON: "+err.Error())
		}
		stream.Write(raw)
		stream.WriteByte('\n')
	}
	decoded, err := manifest.Decode(src.File, &stream, opts)
	for i := range decoded {
		decoded[i].Source = src
	}
	return decoded, relocate(err, src)
}

// isNullList is Argo CD's test for a List whose items are null, which
// IsList does not recognise.
func isNullList(obj *unstructured.Unstructured) bool {
	if _, ok := obj.Object["spec"]; ok {
		return false
	}
	if _, ok := obj.Object["status"]; ok {
		return false
	}
	items, ok := obj.Object["items"]
	return ok && items == nil
}

// relocate rewrites the positions manifest.Decode gave errors, which are
// lines of the re-encoded stream, as the object's place in the output.
func relocate(err error, src manifest.Source) error {
	manifest.EachError(err, func(me *manifest.Error) {
		if me.Source.Line > 0 {
			me.Msg = fmt.Sprintf("object %d of the output: %s", me.Source.Line, me.Msg)
		}
		me.Source = src
	})
	return err
}

// describe names the JSON type of the output for error messages.
func describe(out string) string {
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return "not JSON"
	}
	switch v := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		for _, e := range v {
			if _, ok := e.(map[string]any); !ok && e != nil {
				return "an array with an element that is not an object"
			}
		}
		return "an array of objects"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return "null"
}
