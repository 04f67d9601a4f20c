package schema

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

//go:embed openapi/*.json.gz openapi/resources.json
var openapiFS embed.FS

// Resource is one REST resource as a kube-apiserver serves it.
type Resource struct {
	GVR        k8sschema.GroupVersionResource
	Kind       string
	Namespaced bool
	Verbs      []string
	// Subresources maps a subresource name (status, scale, ...) to the kind
	// it accepts.
	Subresources map[string]k8sschema.GroupVersionKind
	// CRD is set for custom resources.
	CRD *apiextensionsv1.CustomResourceDefinition
}

// GVK returns the kind of the resource's objects.
func (r *Resource) GVK() k8sschema.GroupVersionKind {
	return r.GVR.GroupVersion().WithKind(r.Kind)
}

// Registry knows every resource of a cluster: the built-ins a default
// kube-apiserver 1.37 serves and the CRDs added to it. It is the source of
// discovery (RESTMapper), of resource equivalence for matchPolicy, and of the
// OpenAPI v3 documents that type objects for server-side-apply merges.
type Registry struct {
	mu     sync.RWMutex
	byGVK  map[k8sschema.GroupVersionKind]*Resource
	byGVR  map[k8sschema.GroupVersionResource]*Resource
	crds   map[string]*apiextensionsv1.CustomResourceDefinition // by name
	docs   *documents
	equiv  runtime.EquivalentResourceRegistry
	mapper meta.RESTMapper
}

type indexEntry struct {
	Group        string   `json:"group"`
	Version      string   `json:"version"`
	Resource     string   `json:"resource"`
	Kind         string   `json:"kind"`
	Namespaced   bool     `json:"namespaced"`
	Verbs        []string `json:"verbs"`
	Subresources map[string]struct {
		Group, Version, Kind string
	} `json:"subresources"`
}

// NewRegistry returns a registry holding the built-in resources of a default
// kube-apiserver 1.37.2 (alpha and disabled beta versions are absent).
func NewRegistry() (*Registry, error) {
	data, err := openapiFS.ReadFile("openapi/resources.json")
	if err != nil {
		return nil, fmt.Errorf("reading embedded resource index: %w", err)
	}
	var idx []indexEntry
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("decoding embedded resource index: %w", err)
	}
	r := &Registry{
		byGVK: map[k8sschema.GroupVersionKind]*Resource{},
		byGVR: map[k8sschema.GroupVersionResource]*Resource{},
		crds:  map[string]*apiextensionsv1.CustomResourceDefinition{},
		docs:  newDocuments(),
	}
	for _, e := range idx {
		res := &Resource{
			GVR:        k8sschema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource},
			Kind:       e.Kind,
			Namespaced: e.Namespaced,
			Verbs:      e.Verbs,
		}
		if len(e.Subresources) > 0 {
			res.Subresources = map[string]k8sschema.GroupVersionKind{}
			for name, s := range e.Subresources {
				res.Subresources[name] = k8sschema.GroupVersionKind{Group: s.Group, Version: s.Version, Kind: s.Kind}
			}
		}
		r.add(res)
	}
	r.rebuildLocked()
	return r, nil
}

func (r *Registry) add(res *Resource) {
	r.byGVR[res.GVR] = res
	gvk := res.GVK()
	// Several resources can share a kind (e.g. pods and pods/ephemeralcontainers
	// never do, but events in two groups do not either); the first, sorted by
	// resource name, is the canonical one, like the server's RESTMapper.
	if prev, ok := r.byGVK[gvk]; !ok || res.GVR.Resource < prev.GVR.Resource {
		r.byGVK[gvk] = res
	}
}

// AddCRD registers the served versions of a CustomResourceDefinition.
// Later CRDs with the same name replace earlier ones.
func (r *Registry) AddCRD(crd *apiextensionsv1.CustomResourceDefinition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.crds[crd.Name]; ok {
		for _, v := range old.Spec.Versions {
			gvr := k8sschema.GroupVersionResource{Group: old.Spec.Group, Version: v.Name, Resource: old.Spec.Names.Plural}
			delete(r.byGVR, gvr)
			delete(r.byGVK, gvr.GroupVersion().WithKind(old.Spec.Names.Kind))
		}
	}
	r.crds[crd.Name] = crd
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		res := &Resource{
			GVR:        k8sschema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural},
			Kind:       crd.Spec.Names.Kind,
			Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			Verbs:      []string{"create", "delete", "get", "list", "patch", "update"},
			CRD:        crd,
		}
		if v.Subresources != nil {
			res.Subresources = map[string]k8sschema.GroupVersionKind{}
			if v.Subresources.Status != nil {
				res.Subresources["status"] = res.GVK()
			}
			if v.Subresources.Scale != nil {
				res.Subresources["scale"] = k8sschema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
			}
		}
		r.add(res)
	}
	r.docs.invalidate(crd.Spec.Group)
	r.rebuildLocked()
	return nil
}

// CRDs returns the registered CustomResourceDefinitions sorted by name.
func (r *Registry) CRDs() []*apiextensionsv1.CustomResourceDefinition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(r.crds))
	for _, c := range r.crds {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ForKind returns the resource serving a kind, or an error a user can act on.
func (r *Registry) ForKind(gvk k8sschema.GroupVersionKind) (*Resource, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if res, ok := r.byGVK[gvk]; ok {
		return res, nil
	}
	// Name the versions that are served, the most common mistake.
	var served []string
	for k := range r.byGVK {
		if k.Group == gvk.Group && k.Kind == gvk.Kind {
			served = append(served, k.GroupVersion().String())
		}
	}
	sort.Strings(served)
	if len(served) > 0 {
		return nil, fmt.Errorf("no kind %q is registered for version %q; served versions: %s", gvk.Kind, gvk.GroupVersion(), strings.Join(served, ", "))
	}
	return nil, fmt.Errorf("no kind %q is registered for version %q (a custom resource needs its CustomResourceDefinition in the cluster state)", gvk.Kind, gvk.GroupVersion())
}

// ForResource returns the resource for a GroupVersionResource.
func (r *Registry) ForResource(gvr k8sschema.GroupVersionResource) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.byGVR[gvr]
	return res, ok
}

// RESTMapper maps kinds to resources like the server's discovery does.
func (r *Registry) RESTMapper() meta.RESTMapper {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mapper
}

// EquivalentResourceMapper reports which resources share storage, which drives
// matchPolicy: Equivalent.
func (r *Registry) EquivalentResourceMapper() runtime.EquivalentResourceMapper {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.equiv
}

// Resources lists all resources, sorted by group, version and name.
func (r *Registry) Resources() []*Resource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Resource, 0, len(r.byGVR))
	for _, res := range r.byGVR {
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GVR, out[j].GVR
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	return out
}

// storageIdentity mirrors the server's storage prefixes: resources that
// cohabit one storage are equivalent. Among the versions a default 1.37
// server serves, only core and events.k8s.io events do (see
// pkg/kubeapiserver/default_storage_factory_builder.go upstream).
func storageIdentity(gr k8sschema.GroupResource) string {
	if gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io") {
		return "/events"
	}
	return ""
}

func (r *Registry) rebuildLocked() {
	equiv := runtime.NewEquivalentResourceRegistryWithIdentity(storageIdentity)
	// A kind asked for without a version maps to its group's preferred
	// version, as with kube-apiserver's discovery.
	mapper := meta.NewDefaultRESTMapper(r.groupVersionsLocked())
	for _, res := range r.byGVR {
		scope := meta.RESTScopeRoot
		if res.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		gvk := res.GVK()
		if canonical := r.byGVK[gvk]; canonical == res {
			mapper.AddSpecific(gvk, res.GVR, res.GVR.GroupResource().WithVersion(res.GVR.Version).GroupVersion().WithResource(singular(res)), scope)
		}
		equiv.RegisterKindFor(res.GVR, "", gvk)
		for sub, k := range res.Subresources {
			equiv.RegisterKindFor(res.GVR, sub, k)
		}
	}
	r.equiv = equiv
	r.mapper = mapper
}

func singular(res *Resource) string {
	if res.CRD != nil && res.CRD.Spec.Names.Singular != "" {
		return res.CRD.Spec.Names.Singular
	}
	return strings.ToLower(res.Kind)
}
