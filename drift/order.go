package drift

import (
	"slices"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift/argocd"
)

// Order is how a GitOps tool sequences the writes of one sync: stages
// applied one after the other, each the positions of its objects in objs,
// in the order they are written. The objects of a stage are checked
// against the cluster as the earlier stages left it; a Namespace or CRD
// must be in an earlier stage than the objects that need it.
type Order func(objs []*unstructured.Unstructured) [][]int

// ArgoSyncOrder is Argo CD's: one object at a time, in
// argocd.SyncOrder (sync waves, kind order, names).
func ArgoSyncOrder(objs []*unstructured.Unstructured) [][]int {
	order := argocd.SyncOrder(objs)
	out := make([][]int, len(order))
	for i, at := range order {
		out[i] = []int{at}
	}
	return out
}

// FluxStages is kustomize-controller's (ssa.ResourceManager
// ApplyAllStaged): CustomResourceDefinitions, Namespaces and ClusterRoles,
// then the kinds named *Class, then everything else; each stage dry-run as
// a whole before any of it is applied, and applied in Flux's kind order.
// Empty stages are left out.
func FluxStages(objs []*unstructured.Unstructured) [][]int {
	var definitions, classes, rest []*unstructured.Unstructured
	at := make(map[*unstructured.Unstructured]int, len(objs))
	for i, o := range objs {
		at[o] = i
		switch {
		case ssautils.IsClusterDefinition(o):
			definitions = append(definitions, o)
		case ssautils.IsClassDefinition(o):
			classes = append(classes, o)
		default:
			rest = append(rest, o)
		}
	}
	var out [][]int
	for _, stage := range [][]*unstructured.Unstructured{definitions, classes, rest} {
		if len(stage) == 0 {
			continue
		}
		slices.SortStableFunc(stage, func(a, b *unstructured.Unstructured) int {
			sorted := ssa.SortableUnstructureds{a, b}
			switch {
			case sorted.Less(0, 1):
				return -1
			case sorted.Less(1, 0):
				return 1
			}
			return 0
		})
		positions := make([]int, len(stage))
		for i, o := range stage {
			positions[i] = at[o]
		}
		out = append(out, positions)
	}
	return out
}
