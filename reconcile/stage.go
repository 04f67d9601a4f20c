package reconcile

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/truce-dev/truce/cluster"
)

// isClusterDefinition reports whether obj must exist before others can be
// applied: Namespaces and CustomResourceDefinitions go first, as in Flux's
// ApplyAllStaged.
func isClusterDefinition(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return (gvk.Group == "" && gvk.Kind == "Namespace") ||
		(gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition")
}

// stages splits objects into the definitions and everything else, each in
// the order given.
func stages(objs []*desired) [][]*desired {
	var first, rest []*desired
	for _, d := range objs {
		if isClusterDefinition(d.obj) {
			first = append(first, d)
		} else {
			rest = append(rest, d)
		}
	}
	return [][]*desired{first, rest}
}

// waitReady polls until every Namespace is Active and every CRD
// Established (and its names accepted), or the timeout passes.
func waitReady(ctx context.Context, c cluster.Cluster, refs []cluster.Ref, timeout time.Duration) error {
	if len(refs) == 0 {
		return nil
	}
	pending := append([]cluster.Ref(nil), refs...)
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var still []cluster.Ref
		for _, ref := range pending {
			obj, err := c.Get(ctx, ref)
			switch {
			case apierrors.IsNotFound(err):
				last = ref.String() + " not found"
				still = append(still, ref)
				continue
			case err != nil:
				// The server may be restarting: keep polling until the deadline.
				last = fmt.Sprintf("reading %s: %v", ref, err)
				still = append(still, ref)
				continue
			}
			if ok, why := ready(obj); !ok {
				last = ref.String() + ": " + why
				still = append(still, ref)
				continue
			}
			if ok, why := served(ctx, c, obj); !ok {
				last = ref.String() + ": " + why
				still = append(still, ref)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for namespaces and CRDs to be ready: %s: %w", last, err)
	}
	return nil
}

// definedKind is the group and kind a CRD defines, and whether its
// objects are namespaced.
func definedKind(crd *unstructured.Unstructured) (gk schema.GroupKind, namespaced bool) {
	gk.Group, _, _ = unstructured.NestedString(crd.Object, "spec", "group")
	gk.Kind, _, _ = unstructured.NestedString(crd.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	return gk, scope == "Namespaced"
}

// served reports whether the API server serves every served version of a
// CRD: Established can read True a moment before the new resource's
// handler answers, and a request in that moment gets the bare 404 of an
// unknown path. A read of an arbitrary name tells: a not-found with a
// Status (or the object) means the resource is served.
func served(ctx context.Context, c cluster.Cluster, crd *unstructured.Unstructured) (bool, string) {
	if crd.GetKind() != "CustomResourceDefinition" {
		return true, ""
	}
	gk, namespaced := definedKind(crd)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if on, _ := m["served"].(bool); !on || name == "" {
			continue
		}
		probe := cluster.Ref{GroupVersionKind: gk.WithVersion(name), Name: "truce-readiness-probe"}
		if namespaced {
			probe.Namespace = "default"
		}
		_, err := c.Get(ctx, probe)
		if err != nil && (!apierrors.IsNotFound(err) || apierrors.IsUnexpectedServerError(err)) {
			return false, fmt.Sprintf("%s/%s not served yet: %v", gk.Group, name, err)
		}
	}
	return true, ""
}

func ready(obj *unstructured.Unstructured) (bool, string) {
	switch obj.GetKind() {
	case "Namespace":
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		if phase == "Terminating" {
			return false, "terminating"
		}
		return true, ""
	case "CustomResourceDefinition":
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
			if m["type"] == "NamesAccepted" && m["status"] == "False" {
				return false, fmt.Sprintf("names not accepted: %v", m["message"])
			}
		}
		if !established {
			return false, "not established yet"
		}
	}
	return true, ""
}
