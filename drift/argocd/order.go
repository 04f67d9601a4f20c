package argocd

import (
	"cmp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Annotations that place an object in a sync.
const (
	AnnotationSyncWave = "argocd.argoproj.io/sync-wave"
	// AnnotationHelmHookWeight is the wave of an object without a sync
	// wave.
	AnnotationHelmHookWeight = "helm.sh/hook-weight"
)

// kindRank places the built-in kinds a sync applies before all others
// (Helm's install order, which gitops-engine uses); a kind not listed
// ranks 0, after them.
var kindRank = func() map[string]int {
	kinds := []string{
		"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
		"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap",
		"StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition",
		"ClusterRole", "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList",
		"Role", "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
		"ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
		"StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
	}
	out := make(map[string]int, len(kinds))
	for i, k := range kinds {
		out[k] = i - len(kinds)
	}
	return out
}()

// Wave is the sync wave of obj: its argocd.argoproj.io/sync-wave
// annotation, else its helm.sh/hook-weight, else 0 (a value that is not an
// integer counts as absent).
func Wave(obj *unstructured.Unstructured) int {
	a := obj.GetAnnotations()
	for _, key := range []string{AnnotationSyncWave, AnnotationHelmHookWeight} {
		if v, ok := a[key]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// SyncOrder returns the positions of objs in the order an Argo CD sync
// applies them (gitops-engine's sync task order): by sync wave, then by
// kind (Namespaces, then the other built-in kinds in Helm's order, then
// every other kind), then by name. A Namespace placed after an object in
// it, or a CustomResourceDefinition after one of its custom resources (a
// later wave), moves to just before the first of them, as gitops-engine
// moves dependencies. Hooks are not told apart: every object is a
// resource of the Sync phase.
func SyncOrder(objs []*unstructured.Unstructured) []int {
	order := make([]int, len(objs))
	waves := make([]int, len(objs))
	for i, o := range objs {
		order[i] = i
		waves[i] = Wave(o)
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := objs[i], objs[j]
		return cmp.Or(
			cmp.Compare(waves[i], waves[j]),
			cmp.Compare(kindRank[a.GetKind()], kindRank[b.GetKind()]),
			cmp.Compare(a.GetName(), b.GetName()),
		)
	})
	moveBefore(order, objs, namespaceDefined, inNamespace)
	moveBefore(order, objs, crdDefined, ofKind)
	return order
}

// moveBefore moves each object that defines a key (defines) to just before
// the first object before it that needs that key (needs).
func moveBefore(order []int, objs []*unstructured.Unstructured, defines, needs func(*unstructured.Unstructured) (string, bool)) {
	first := map[string]int{}
	for at := range order {
		o := objs[order[at]]
		if key, ok := defines(o); ok {
			to, ok := first[key]
			if !ok {
				continue
			}
			moved := order[at]
			copy(order[to+1:at+1], order[to:at])
			order[to] = moved
			for k, v := range first {
				if v >= to {
					first[k] = v + 1
				}
			}
			continue
		}
		if key, ok := needs(o); ok {
			if _, seen := first[key]; !seen {
				first[key] = at
			}
		}
	}
}

func namespaceDefined(o *unstructured.Unstructured) (string, bool) {
	return o.GetName(), o.GetKind() == "Namespace" && o.GroupVersionKind().Group == ""
}

func inNamespace(o *unstructured.Unstructured) (string, bool) {
	return o.GetNamespace(), o.GetNamespace() != ""
}

func crdDefined(o *unstructured.Unstructured) (string, bool) {
	if o.GetKind() != "CustomResourceDefinition" || o.GroupVersionKind().Group != "apiextensions.k8s.io" {
		return "", false
	}
	group, ok1, _ := unstructured.NestedString(o.Object, "spec", "group")
	kind, ok2, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
	return group + "/" + kind, ok1 && ok2
}

func ofKind(o *unstructured.Unstructured) (string, bool) {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind, true
}
