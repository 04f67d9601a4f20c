package world

import (
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
)

// inCluster is Argo CD's name and address for the cluster it runs in.
const (
	inClusterName   = "in-cluster"
	inClusterServer = "https://kubernetes.default.svc"
)

// destination is the cluster a unit's objects go to, "" for the one the
// entry point syncs: an Application's destination server or name (Argo
// CD's own cluster is ""), a Kustomization's or HelmRelease's kubeConfig
// secret.
func destination(obj *unstructured.Unstructured, kind string) string {
	switch kind {
	case KindApplication:
		server, _, _ := unstructured.NestedString(obj.Object, "spec", "destination", "server")
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "destination", "name")
		switch {
		case server != "" && server != inClusterServer:
			return server
		case server == "" && name != "" && name != inClusterName:
			return "cluster " + name
		}
	case KindKustomization, KindHelmRelease:
		if name, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeConfig", "secretRef", "name"); name != "" {
			return "kubeConfig " + obj.GetNamespace() + "/" + name
		}
		if name, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeConfig", "configMapRef", "name"); name != "" {
			return "kubeConfig " + obj.GetNamespace() + "/" + name
		}
	}
	return ""
}

// syncWave is an Application's argocd.argoproj.io/sync-wave, the order in
// which the Application that renders it applies it (0 when unset or not
// a number, as Argo CD reads it).
func syncWave(obj *unstructured.Unstructured) int {
	w, err := strconv.Atoi(obj.GetAnnotations()["argocd.argoproj.io/sync-wave"])
	if err != nil {
		return 0
	}
	return w
}

// byWave sorts the Applications each parent renders by their sync wave,
// in the places they hold, so that an app of apps applies them wave by
// wave; other units keep their places.
func byWave(units []*Unit) {
	groups := map[manifest.Unit][]int{}
	var keys []manifest.Unit
	for i, u := range units {
		if u.Kind != KindApplication || u.Parent.IsZero() {
			continue
		}
		if _, ok := groups[u.Parent]; !ok {
			keys = append(keys, u.Parent)
		}
		groups[u.Parent] = append(groups[u.Parent], i)
	}
	for _, k := range keys {
		at := groups[k]
		group := make([]*Unit, len(at))
		for j, i := range at {
			group[j] = units[i]
		}
		sort.SliceStable(group, func(a, b int) bool { return group[a].Wave < group[b].Wave })
		for j, i := range at {
			units[i] = group[j]
		}
	}
}
