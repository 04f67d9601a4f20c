package admission

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReviewObjects returns the objects among objs that a chain of
// WebhookOptions reads while it reviews writes (Chain.Mutate,
// Chain.Validate): the admission configuration, namespaces, CRDs, RBAC,
// service accounts and the objects of the kinds the policies among objs
// name as their paramKind. A reviewed object arrives in its review, so
// the other objects of a repository are never looked up; leaving them
// out of the state saves storing them in every chain built to review.
func ReviewObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	params := map[[2]string]bool{}
	for _, o := range objs {
		if !isPolicyKind(o.GetKind()) {
			continue
		}
		params[paramKindOf(o)] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if configurationKinds.Has(gvk.Kind) || mirroredKinds.Has(gvk.GroupKind()) || params[[2]string{o.GetAPIVersion(), gvk.Kind}] {
			out = append(out, o)
		}
	}
	return out
}
