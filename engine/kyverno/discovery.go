package kyverno

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"sort"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/openapi"

	"github.com/truce-dev/truce/schema"
)

// registry returns the cluster's schemas: the built-ins of Kubernetes 1.37
// and the CRDs among objs.
func registry(objs []*unstructured.Unstructured) (*schema.Registry, error) {
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
	return reg, nil
}

// discovery returns the API resources of reg as kube-apiserver's discovery
// lists them, each group's preferred version first. Kyverno turns a
// policy's kinds into webhook rules and matches requests through it, and
// reads the preferred versions (ServerPreferredResources).
func discovery(reg *schema.Registry) []*metav1.APIResourceList {
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
	// client-go's fake discovery takes a group's first version for its
	// preferred one, and lists the versions in this order.
	out := make([]*metav1.APIResourceList, 0, len(byGV))
	for _, gv := range reg.GroupVersions() {
		if l, ok := byGV[gv.String()]; ok {
			out = append(out, l)
		}
	}
	return out
}

// docCache keeps the gzipped OpenAPI documents sent to the helper, by their
// server-relative URL (which carries the document's hash): the built-in
// documents are the same for every chain a process builds.
type docCache struct {
	mu sync.Mutex
	gz map[string][]byte
}

// gzipped returns every document of c by path ("api/v1", "apis/apps/v1"),
// gzipped JSON, as the helper's protocol carries them.
func (d *docCache) gzipped(c openapi.Client) (map[string][]byte, error) {
	paths, err := c.Paths()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gz == nil {
		d.gz = map[string][]byte{}
	}
	out := make(map[string][]byte, len(paths))
	for p, gv := range paths {
		key := gv.ServerRelativeURL()
		if z, ok := d.gz[key]; ok {
			out[p] = z
			continue
		}
		doc, err := gv.Schema(runtime.ContentTypeJSON)
		if err != nil {
			return nil, fmt.Errorf("OpenAPI document %s: %w", p, err)
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(doc); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		d.gz[key] = buf.Bytes()
		out[p] = buf.Bytes()
	}
	return out, nil
}
