// Package kubectl builds the requests kubectl sends for its write commands
// with kubectl's own code (k8s.io/kubectl), so that truce admit and the
// clients of the in-process cluster ask the admission chain exactly what
// kubectl would ask the API server.
package kubectl

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/cmd/apply"
	"k8s.io/kubectl/pkg/scheme"
	"k8s.io/kubectl/pkg/util"
)

// The field managers kubectl's commands send when --field-manager is not
// given.
const (
	// ClientSideApplyManager is kubectl apply's.
	ClientSideApplyManager = apply.FieldManagerClientSideApply
	// ServerSideApplyManager is kubectl apply --server-side's.
	ServerSideApplyManager = "kubectl"
	// PatchManager is kubectl patch's.
	PatchManager = "kubectl-patch"
	// ScaleManager is what the server records for kubectl scale, which
	// sends no field manager: the prefix of kubectl's user agent.
	ScaleManager = "kubectl"
)

// LastAppliedAnnotation is where kubectl apply keeps the configuration it
// applied last.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ApplyRequest is the request kubectl apply (client-side) sends for a manifest.
type ApplyRequest struct {
	// Create is set when the object does not exist: kubectl creates Object,
	// the manifest carrying its last-applied-configuration annotation.
	Create bool
	Object *unstructured.Unstructured
	// PatchType and Patch are the PATCH kubectl sends for an object that
	// exists: the three-way merge of the last-applied configuration, the
	// manifest and the live object, strategic for the kinds kubectl knows,
	// a JSON merge patch for the others (custom resources).
	PatchType types.PatchType
	Patch     []byte
	// Patched is the live object with the patch applied on the client, as
	// kubectl apply --dry-run=client shows it.
	Patched *unstructured.Unstructured
	// Unchanged is set when the patch is empty: kubectl sends nothing and
	// prints "unchanged".
	Unchanged bool
}

// ClientSideApply computes what kubectl apply sends for config when live is
// the object stored (nil when there is none), with kubectl's own apply
// code: the annotation it records (util.GetModifiedConfiguration,
// util.CreateApplyAnnotation) and its patcher (apply.Patcher, computing the
// patch from kubectl's built-in types, as kubectl does when it does not use
// the server's OpenAPI document; both give the same patch strategies).
// live must be in config's version, as kubectl reads it.
func ClientSideApply(config, live *unstructured.Unstructured) (*ApplyRequest, error) {
	obj := config.DeepCopy()
	if live == nil {
		if err := util.CreateApplyAnnotation(obj, unstructured.UnstructuredJSONScheme); err != nil {
			return nil, fmt.Errorf("recording the last-applied configuration: %w", err)
		}
		return &ApplyRequest{Create: true, Object: obj}, nil
	}
	modified, err := util.GetModifiedConfiguration(obj, true, unstructured.UnstructuredJSONScheme)
	if err != nil {
		return nil, fmt.Errorf("recording the last-applied configuration: %w", err)
	}
	gvk := config.GroupVersionKind()
	p := &apply.Patcher{Mapping: &meta.RESTMapping{GroupVersionKind: gvk}, Overwrite: true}
	// PatchLocal computes the patch as Patch does, without sending it.
	patch, patched, err := p.PatchLocal(live.DeepCopy(), modified, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("computing kubectl apply's patch: %w", err)
	}
	if string(patch) == "{}" {
		return &ApplyRequest{Unchanged: true, Patched: live.DeepCopy()}, nil
	}
	u, ok := patched.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("kubectl's patcher answered %T", patched)
	}
	return &ApplyRequest{PatchType: PatchTypeFor(config), Patch: patch, Patched: u}, nil
}

// PatchTypeFor is the patch type kubectl's patcher chooses for an object:
// strategic merge for the kinds it knows, JSON merge for the others.
func PatchTypeFor(obj runtime.Object) types.PatchType {
	if scheme.Scheme.Recognizes(obj.GetObjectKind().GroupVersionKind()) {
		return types.StrategicMergePatchType
	}
	return types.MergePatchType
}
