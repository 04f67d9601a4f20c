package schema

import (
	"sort"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// GroupVersions returns the group versions r serves, each group's in the
// order kube-apiserver's discovery lists them: the preferred version first,
// then by Kubernetes' version priority (GA before beta before alpha, higher
// numbers first). That is the priority apiextensions-apiserver gives a CRD
// group's versions, and the one the built-in groups register for the
// versions a default server serves (TestDiscoveryVersionOrder in
// e2e/differential holds it against kube-apiserver). Groups are sorted by
// name, the core group first.
func (r *Registry) GroupVersions() []k8sschema.GroupVersion {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.groupVersionsLocked()
}

func (r *Registry) groupVersionsLocked() []k8sschema.GroupVersion {
	seen := map[k8sschema.GroupVersion]bool{}
	var out []k8sschema.GroupVersion
	for gvr := range r.byGVR {
		if gv := gvr.GroupVersion(); !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return version.CompareKubeAwareVersionStrings(out[i].Version, out[j].Version) > 0
	})
	return out
}
