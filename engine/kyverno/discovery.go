package kyverno

import (
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/truce-dev/truce/schema"
)

// discovery returns the cluster's API resources as kube-apiserver's
// discovery lists them: the built-ins of Kubernetes 1.37 and the CRDs
// among objs. Kyverno turns a policy's kinds into webhook rules and
// matches requests through it.
func discovery(objs []*unstructured.Unstructured) ([]*metav1.APIResourceList, error) {
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" || o.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", o.GetName(), err)
		}
		if err := reg.AddCRD(&crd); err != nil {
			return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", o.GetName(), err)
		}
	}
	byGV := map[string]*metav1.APIResourceList{}
	for _, r := range reg.Resources() {
		gv := r.GVR.GroupVersion().String()
		l, ok := byGV[gv]
		if !ok {
			l = &metav1.APIResourceList{GroupVersion: gv}
			byGV[gv] = l
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name:       r.GVR.Resource,
			Namespaced: r.Namespaced,
			Kind:       r.Kind,
			Verbs:      r.Verbs,
		})
		subs := make([]string, 0, len(r.Subresources))
		for s := range r.Subresources {
			subs = append(subs, s)
		}
		sort.Strings(subs)
		for _, s := range subs {
			k := r.Subresources[s]
			l.APIResources = append(l.APIResources, metav1.APIResource{
				Name:       r.GVR.Resource + "/" + s,
				Namespaced: r.Namespaced,
				Group:      k.Group,
				Version:    k.Version,
				Kind:       k.Kind,
				Verbs:      []string{"get", "patch", "update"},
			})
		}
	}
	gvs := make([]string, 0, len(byGV))
	for gv := range byGV {
		gvs = append(gvs, gv)
	}
	sort.Strings(gvs)
	out := make([]*metav1.APIResourceList, 0, len(gvs))
	for _, gv := range gvs {
		out = append(out, byGV[gv])
	}
	return out, nil
}
