package argocd

import (
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// AnnotationLastAppliedConfig is the annotation kubectl (and Argo CD's
// client-side apply) stores the applied manifest in; the legacy diff uses it
// as the "original" of its three-way merge.
const AnnotationLastAppliedConfig = corev1.LastAppliedConfigAnnotation

// Result is the outcome of one diff, gitops-engine's DiffResult with decoded
// objects instead of JSON bytes.
type Result struct {
	// PredictedLive is what the live object would look like after a sync:
	// the live object with Git applied (legacy diff) or the server's dry-run
	// answer (server-side diff). Nil when the object is not in Git.
	PredictedLive *unstructured.Unstructured
	// Live is the live object as it was compared: normalized, and with scheme
	// defaults applied for built-in types. Nil when it is not in the cluster.
	Live *unstructured.Unstructured
	// Modified is Argo CD's verdict: the JSON encodings of PredictedLive and
	// Live differ byte for byte.
	Modified bool
	// Notes records what Argo CD only logs at debug level but that explains a
	// result, such as the fall back from a three-way to a two-way diff.
	Notes []string
}

// Normalizer changes an object before it is compared, like gitops-engine's
// diff.Normalizer (ignoreDifferences, known types, ...).
type Normalizer interface {
	Normalize(un *unstructured.Unstructured) error
}

// Options configures Diff and Normalize, mirroring the gitops-engine diff
// options that affect the result.
type Options struct {
	// IgnoreAggregatedRoles drops the rules of Roles and ClusterRoles that have
	// an aggregationRule (argocd-cm resource.compareoptions.ignoreAggregatedRoles).
	IgnoreAggregatedRoles bool
	// Normalizer, when set, runs on every object after the built-in
	// normalizations.
	Normalizer Normalizer
}

// Diff computes Argo CD's legacy diff of a Git manifest (config) and a live
// object, as gitops-engine's diff.Diff does without the server-side options:
// both are remarshalled and normalized; when live carries a
// last-applied-configuration the diff is three-way, else two-way. A nil
// config means the object is not in Git, a nil live that it is not in the
// cluster.
func Diff(config, live *unstructured.Unstructured, opts Options) (*Result, error) {
	var err error
	if config != nil {
		if config, err = remarshal(config); err != nil {
			return nil, fmt.Errorf("remarshalling desired object: %w", err)
		}
		if err := Normalize(config, opts); err != nil {
			return nil, fmt.Errorf("normalizing desired object: %w", err)
		}
	}
	if live != nil {
		if live, err = remarshal(live); err != nil {
			return nil, fmt.Errorf("remarshalling live object: %w", err)
		}
		if err := Normalize(live, opts); err != nil {
			return nil, fmt.Errorf("normalizing live object: %w", err)
		}
	}

	// Argo CD swallows both a malformed annotation and a failed three-way diff
	// and falls back to the two-way diff; we keep the reason as a note.
	var notes []string
	orig, err := lastAppliedConfig(live)
	switch {
	case err != nil:
		notes = append(notes, fmt.Sprintf("ignoring last-applied-configuration: %v", err))
	case orig != nil && config != nil:
		if err := Normalize(orig, opts); err != nil {
			return nil, fmt.Errorf("normalizing last-applied-configuration: %w", err)
		}
		res, err := ThreeWayDiff(orig, config, live)
		if err == nil {
			return res, nil
		}
		notes = append(notes, fmt.Sprintf("three-way diff failed, falling back to two-way diff: %v", err))
	}
	res, err := TwoWayDiff(config, live)
	if err != nil {
		return nil, err
	}
	res.Notes = append(notes, res.Notes...)
	return res, nil
}

// TwoWayDiff is the diff Argo CD runs when the live object has no
// last-applied-configuration: a three-way diff with the Git manifest as its
// own original, so nothing the manifest does not mention is removed.
func TwoWayDiff(config, live *unstructured.Unstructured) (*Result, error) {
	if config != nil && live != nil {
		return ThreeWayDiff(config, config.DeepCopy(), live)
	}
	return createOrDeleteDiff(config, live)
}

// createOrDeleteDiff mirrors gitops-engine's handleResourceCreateOrDeleteDiff:
// an object missing from the cluster is always modified (it must be created);
// an object missing from Git is never modified (pruning is decided elsewhere).
func createOrDeleteDiff(config, live *unstructured.Unstructured) (*Result, error) {
	switch {
	case config != nil && live != nil:
		return nil, errors.New("expected the desired or the live object to be nil")
	case live != nil:
		l, err := roundTrip(live)
		if err != nil {
			return nil, fmt.Errorf("encoding live object: %w", err)
		}
		return &Result{Live: l, Modified: false}, nil
	case config != nil:
		c, err := roundTrip(config)
		if err != nil {
			return nil, fmt.Errorf("encoding desired object: %w", err)
		}
		return &Result{PredictedLive: c, Modified: true}, nil
	default:
		return nil, errors.New("both the desired and the live object are nil")
	}
}

// ThreeWayDiff predicts the live object after applying config over live, with
// orig as the previously applied configuration (kubectl apply's three-way
// merge), and compares the prediction with live. Built-in types use a
// strategic merge patch and get their scheme defaults applied to both sides;
// other types use a JSON merge patch.
func ThreeWayDiff(orig, config, live *unstructured.Unstructured) (*Result, error) {
	if orig == nil || config == nil || live == nil {
		return nil, errors.New("three-way diff needs the original, desired and live objects")
	}
	orig = removeNamespaceAnnotation(orig)
	config = removeNamespaceAnnotation(config)

	patch, builtin, err := threeWayMergePatch(orig, config, live)
	if err != nil {
		return nil, fmt.Errorf("computing three-way merge patch: %w", err)
	}
	liveJSON, err := json.Marshal(live)
	if err != nil {
		return nil, fmt.Errorf("encoding live object: %w", err)
	}
	var predictedJSON []byte
	if builtin {
		liveJSON, predictedJSON, err = applyStrategicPatch(liveJSON, patch, orig.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("applying strategic merge patch: %w", err)
		}
	} else {
		predictedJSON, err = jsonpatch.MergePatch(liveJSON, patch)
		if err != nil {
			return nil, fmt.Errorf("applying JSON merge patch: %w", err)
		}
	}
	return buildResult(predictedJSON, liveJSON)
}

// buildResult compares the two encodings byte for byte, as gitops-engine's
// buildDiffResult does, and decodes them for the caller.
func buildResult(predictedJSON, liveJSON []byte) (*Result, error) {
	predicted, err := decodeObject(predictedJSON)
	if err != nil {
		return nil, fmt.Errorf("decoding predicted live object: %w", err)
	}
	live, err := decodeObject(liveJSON)
	if err != nil {
		return nil, fmt.Errorf("decoding live object: %w", err)
	}
	return &Result{
		PredictedLive: predicted,
		Live:          live,
		Modified:      string(predictedJSON) != string(liveJSON),
	}, nil
}

// decodeObject decodes JSON the way unstructured objects hold it (int64 for
// integers) without requiring apiVersion and kind.
func decodeObject(data []byte) (*unstructured.Unstructured, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("not a JSON object")
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func roundTrip(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	return decodeObject(data)
}

// lastAppliedConfig decodes the last-applied-configuration annotation, or
// returns nil when there is none.
func lastAppliedConfig(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if live == nil {
		return nil, nil
	}
	s, ok := live.GetAnnotations()[AnnotationLastAppliedConfig]
	if !ok {
		return nil, nil
	}
	orig, err := decodeObject([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("decoding %s of %s: %w", AnnotationLastAppliedConfig, live.GetName(), err)
	}
	return orig, nil
}

// removeNamespaceAnnotation drops metadata.namespace and an empty or null
// annotation map from a copy of obj: live objects carry a namespace that
// manifests and last-applied often omit, and that is no drift
// (gitops-engine pkg/diff/diff.go removeNamespaceAnnotation).
func removeNamespaceAnnotation(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	delete(md, "namespace")
	if a, ok := md["annotations"]; ok {
		if a == nil {
			delete(md, "annotations")
		} else if m, ok := a.(map[string]any); ok && len(m) == 0 {
			delete(md, "annotations")
		}
	}
	return obj
}

// threeWayMergePatch mirrors gitops-engine's function of the same name. It
// reports whether the kind is a built-in type, in which case the patch is a
// strategic merge patch.
func threeWayMergePatch(orig, config, live *unstructured.Unstructured) (patch []byte, builtin bool, err error) {
	origJSON, err := json.Marshal(orig.Object)
	if err != nil {
		return nil, false, fmt.Errorf("encoding original object: %w", err)
	}
	configJSON, err := json.Marshal(config.Object)
	if err != nil {
		return nil, false, fmt.Errorf("encoding desired object: %w", err)
	}

	gvk := orig.GroupVersionKind()
	if versioned, err := newVersioned(gvk); err == nil {
		if (gvk.Group == "apps" || gvk.Group == "extensions") && gvk.Kind == "StatefulSet" {
			live = statefulSetWorkaround(orig, live)
		}
		liveJSON, err := json.Marshal(live.Object)
		if err != nil {
			return nil, false, fmt.Errorf("encoding live object: %w", err)
		}
		meta, err := strategicpatch.NewPatchMetaFromStruct(versioned)
		if err != nil {
			return nil, false, fmt.Errorf("reading patch metadata of %s: %w", gvk, err)
		}
		patch, err := strategicpatch.CreateThreeWayMergePatch(origJSON, configJSON, liveJSON, meta, true)
		if err != nil {
			return nil, false, err
		}
		return patch, true, nil
	}

	// Not a built-in type: drop from live every field the original does not
	// have, so fields defaulted or added by others are left alone.
	trimmed := removeMapFields(orig.Object, live.Object)
	liveJSON, err := json.Marshal(trimmed)
	if err != nil {
		return nil, false, fmt.Errorf("encoding live object: %w", err)
	}
	patch, err = jsonmergepatch.CreateThreeWayJSONMergePatch(origJSON, configJSON, liveJSON)
	if err != nil {
		return nil, false, err
	}
	return patch, false, nil
}

// statefulSetWorkaround strips from live's volumeClaimTemplates the fields the
// API server defaults but client-side defaulting cannot reproduce
// (gitops-engine pkg/diff/diff.go statefulSetWorkaround).
func statefulSetWorkaround(orig, live *unstructured.Unstructured) *unstructured.Unstructured {
	origTemplates, ok, err := unstructured.NestedSlice(orig.Object, "spec", "volumeClaimTemplates")
	if !ok || err != nil {
		return live
	}
	liveTemplates, ok, err := unstructured.NestedSlice(live.Object, "spec", "volumeClaimTemplates")
	if !ok || err != nil {
		return live
	}
	live = live.DeepCopy()
	// The value is a JSON list, so SetNestedField cannot fail here.
	_ = unstructured.SetNestedField(live.Object, removeListFields(origTemplates, liveTemplates), "spec", "volumeClaimTemplates")
	return live
}

// applyStrategicPatch mirrors gitops-engine's applyPatch: it applies the
// patch to live and then applies the scheme defaults of the kind to both the
// prediction and live, so that fields the API server would default are not
// reported. Fields the Go struct does not know survive, because the defaults
// are applied as a patch to the JSON rather than by re-encoding the struct.
func applyStrategicPatch(liveJSON, patch []byte, gvk schema.GroupVersionKind) (newLive, predicted []byte, err error) {
	typed, err := newVersioned(gvk)
	if err != nil {
		return nil, nil, err
	}
	predicted, err = strategicpatch.StrategicMergePatch(liveJSON, patch, typed)
	if err != nil {
		return nil, nil, err
	}
	// As upstream, an object the struct cannot decode is compared without
	// defaults rather than failing the diff.
	if err := json.Unmarshal(predicted, typed); err == nil {
		if predicted, err = withSchemeDefaults(predicted, typed); err != nil {
			return nil, nil, fmt.Errorf("defaulting predicted live object: %w", err)
		}
	}

	liveTyped, err := newVersioned(gvk)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(liveJSON, liveTyped); err == nil {
		if liveJSON, err = withSchemeDefaults(liveJSON, liveTyped); err != nil {
			return nil, nil, fmt.Errorf("defaulting live object: %w", err)
		}
	}
	return liveJSON, predicted, nil
}
