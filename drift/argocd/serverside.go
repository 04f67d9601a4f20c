package argocd

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// ServerSideDiffManager is the field manager Argo CD's application controller
// uses for server-side apply, its dry runs included.
const ServerSideDiffManager = "argocd-controller"

// SSDOptions configures ServerSideDiff.
type SSDOptions struct {
	Options
	// IgnoreMutationWebhook removes from the dry-run answer the changes of
	// mutating webhooks. It is Argo CD's default; the compare option
	// IncludeMutationWebhook=true turns it off.
	IgnoreMutationWebhook bool
	// Manager is the field manager of the dry run; empty means
	// ServerSideDiffManager.
	Manager string
	// TypeConverter types the object's kind; required with
	// IgnoreMutationWebhook.
	TypeConverter managedfields.TypeConverter
}

// DefaultSSDOptions returns Argo CD's defaults for a server-side diff of the
// kinds tc knows: mutating webhook changes ignored, manager argocd-controller.
func DefaultSSDOptions(tc managedfields.TypeConverter) SSDOptions {
	return SSDOptions{
		IgnoreMutationWebhook: true,
		Manager:               ServerSideDiffManager,
		TypeConverter:         tc,
	}
}

// ServerSideDiff compares the answer of a server-side apply dry run of the
// Git manifest (predictedLive, with its managedFields) with the live object,
// as gitops-engine's serverSideDiff does once the dry run has returned.
//
// Argo CD runs no dry run for objects missing from the cluster or from Git:
// for a nil live, pass the Git manifest as predictedLive (it is reported as
// modified); a nil predictedLive means the object is not in Git (not
// modified).
func ServerSideDiff(predictedLive, live *unstructured.Unstructured, opts SSDOptions) (*Result, error) {
	var err error
	// The live object goes through Diff's preparation (remarshal, Normalize)
	// before gitops-engine dispatches to the server-side diff.
	if live != nil {
		if live, err = remarshal(live); err != nil {
			return nil, fmt.Errorf("remarshalling live object: %w", err)
		}
		if err := Normalize(live, opts.Options); err != nil {
			return nil, fmt.Errorf("normalizing live object: %w", err)
		}
	}
	if predictedLive == nil || live == nil {
		if predictedLive != nil {
			if predictedLive, err = remarshal(predictedLive); err != nil {
				return nil, fmt.Errorf("remarshalling desired object: %w", err)
			}
			if err := Normalize(predictedLive, opts.Options); err != nil {
				return nil, fmt.Errorf("normalizing desired object: %w", err)
			}
		}
		return createOrDeleteDiff(predictedLive, live)
	}

	kind, name := predictedLive.GetKind(), predictedLive.GetName()
	predictedLive = predictedLive.DeepCopy()
	if opts.IgnoreMutationWebhook {
		manager := opts.Manager
		if manager == "" {
			manager = ServerSideDiffManager
		}
		predictedLive, err = RemoveWebhookMutation(predictedLive, live, opts.TypeConverter, manager)
		if err != nil {
			return nil, fmt.Errorf("removing webhook mutations of %s %s: %w", kind, name, err)
		}
	}
	if err := Normalize(predictedLive, opts.Options); err != nil {
		return nil, fmt.Errorf("normalizing predicted live object: %w", err)
	}
	unstructured.RemoveNestedField(predictedLive.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(live.Object, "metadata", "managedFields")

	predictedJSON, err := json.Marshal(predictedLive.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding predicted live object: %w", err)
	}
	liveJSON, err := json.Marshal(live.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding live object: %w", err)
	}
	return buildResult(predictedJSON, liveJSON)
}

// RemoveWebhookMutation takes out of a dry-run answer what mutating webhooks
// changed, as gitops-engine's removeWebhookMutation does: every field of
// predictedLive that manager does not own according to predictedLive's
// managedFields is dropped, and the rest is merged over live. A field a
// webhook added therefore disappears, one it changed gets its live value
// back; a field manager owns keeps the dry-run value even when a webhook
// changed it. It fails when predictedLive has no managedFields or none for
// manager.
func RemoveWebhookMutation(predictedLive, live *unstructured.Unstructured, tc managedfields.TypeConverter, manager string) (*unstructured.Unstructured, error) {
	if predictedLive == nil || live == nil {
		return nil, errors.New("removing webhook mutations needs the predicted live and the live objects")
	}
	entries := predictedLive.GetManagedFields()
	if len(entries) == 0 {
		return nil, fmt.Errorf("predicted live %s %s must have managedFields", predictedLive.GetKind(), predictedLive.GetName())
	}
	if tc == nil {
		return nil, errors.New("removing webhook mutations needs a type converter")
	}
	gvk := predictedLive.GroupVersionKind()
	typedPredicted, err := tc.ObjectToTyped(predictedLive)
	if err != nil {
		return nil, fmt.Errorf("typing predicted live object as %s: %w", gvk, err)
	}
	typedLive, err := tc.ObjectToTyped(live)
	if err != nil {
		return nil, fmt.Errorf("typing live object as %s: %w", gvk, err)
	}

	owned := &fieldpath.Set{}
	for i, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			return nil, fmt.Errorf("decoding managedFields[%d] (%s): %w", i, e.Manager, err)
		}
		if e.Manager == manager {
			owned = owned.Union(s)
		}
	}
	if owned.Empty() {
		return nil, fmt.Errorf("no managed fields found for manager %q", manager)
	}

	all, err := typedPredicted.ToFieldSet()
	if err != nil {
		return nil, fmt.Errorf("listing fields of predicted live object: %w", err)
	}
	notOwned := safeToRemove(typedPredicted, all.Difference(owned))
	typedPredicted = typedPredicted.RemoveItems(notOwned)

	merged, err := typedLive.Merge(typedPredicted)
	if err != nil {
		return nil, fmt.Errorf("merging owned fields over live object: %w", err)
	}
	obj, ok := merged.AsValue().Unstructured().(map[string]any)
	if !ok {
		return nil, fmt.Errorf("merged object is %T, not an object", merged.AsValue().Unstructured())
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// safeToRemove keeps out of remove the fields whose removal would leave
// predicted invalid for its schema (for example a list item's key field), as
// gitops-engine's safelyRemoveFieldsSet does.
func safeToRemove(predicted *typed.TypedValue, remove *fieldpath.Set) *fieldpath.Set {
	if predicted.RemoveItems(remove).Validate() == nil {
		return remove
	}
	safe := fieldpath.NewSet()
	remove.Iterate(func(p fieldpath.Path) {
		if predicted.RemoveItems(fieldpath.NewSet(p)).Validate() == nil {
			safe.Insert(p)
		}
	})
	return safe
}
