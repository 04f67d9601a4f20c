package argocd

import (
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/api/v1/endpoints"
)

// Normalize applies Argo CD's built-in normalizations to un in place, then
// opts.Normalizer (gitops-engine pkg/diff/diff.go Normalize). Argo CD only
// logs a failing normalizer; we return its error so that a broken ignore rule
// is not mistaken for drift or for its absence.
func Normalize(un *unstructured.Unstructured, opts Options) error {
	if un == nil {
		return nil
	}
	// Exported manifests often carry creationTimestamp: null.
	unstructured.RemoveNestedField(un.Object, "metadata", "creationTimestamp")

	gvk := un.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "Secret":
		NormalizeSecret(un)
	case gvk.Group == "rbac.authorization.k8s.io" && (gvk.Kind == "ClusterRole" || gvk.Kind == "Role"):
		normalizeRole(un, opts.IgnoreAggregatedRoles)
	case gvk.Group == "" && gvk.Kind == "Endpoints":
		normalizeEndpoints(un)
	}

	if opts.Normalizer != nil {
		if err := opts.Normalizer.Normalize(un); err != nil {
			return fmt.Errorf("normalizing %s %s/%s: %w", gvk, un.GetNamespace(), un.GetName(), err)
		}
	}
	return nil
}

// NormalizeSecret folds stringData into data (base64-encoded, as the API
// server stores it) and turns null data values into empty strings
// (argo-cd#943). Non-string stringData values are copied as they are so the
// object stays invalid; a Secret that does not decode is left as it is
// (gitops-engine pkg/diff/diff.go NormalizeSecret).
func NormalizeSecret(un *unstructured.Unstructured) {
	if un == nil {
		return
	}
	gvk := un.GroupVersionKind()
	if gvk.Group != "" || gvk.Kind != "Secret" {
		return
	}
	if stringData, found, err := unstructured.NestedMap(un.Object, "stringData"); found && err == nil {
		data, found, _ := unstructured.NestedMap(un.Object, "data")
		if !found || data == nil {
			data = map[string]any{}
		}
		for k, v := range stringData {
			if s, ok := v.(string); ok {
				data[k] = base64.StdEncoding.EncodeToString([]byte(s))
			} else {
				data[k] = v
			}
		}
		if err := unstructured.SetNestedField(un.Object, data, "data"); err == nil {
			delete(un.Object, "stringData")
		}
	}

	var secret corev1.Secret
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(un.Object, &secret); err != nil {
		return
	}
	for k, v := range secret.Data {
		if len(v) == 0 {
			secret.Data[k] = []byte{}
		}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&secret)
	if err != nil || secret.Data == nil {
		return
	}
	un.Object["data"] = obj["data"]
}

// normalizeRole sets rules to null when they are an empty list, or, with
// ignoreAggregated, when the role has an aggregationRule: the aggregation
// controller owns those rules (gitops-engine pkg/diff/diff.go normalizeRole).
func normalizeRole(un *unstructured.Unstructured, ignoreAggregated bool) {
	if ignoreAggregated {
		if agg, ok := un.Object["aggregationRule"]; ok {
			if _, ok := agg.(map[string]any); ok {
				un.Object["rules"] = nil
			}
		}
	}
	if rules, ok := un.Object["rules"].([]any); ok && len(rules) == 0 {
		un.Object["rules"] = nil
	}
}

// normalizeEndpoints defaults port protocols to TCP and sorts subsets the way
// the endpoints controller does (gitops-engine pkg/diff/diff.go
// normalizeEndpoint). Like upstream it re-encodes the whole object.
func normalizeEndpoints(un *unstructured.Unstructured) {
	//lint:ignore SA1019 Endpoints is deprecated but still served, and Argo CD still normalizes it.
	var ep corev1.Endpoints
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(un.Object, &ep); err != nil {
		return
	}
	for s := range ep.Subsets {
		for p := range ep.Subsets[s].Ports {
			if ep.Subsets[s].Ports[p].Protocol == "" {
				ep.Subsets[s].Ports[p].Protocol = corev1.ProtocolTCP
			}
		}
	}
	ep.Subsets = endpoints.SortSubsets(ep.Subsets)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ep)
	if err != nil {
		return
	}
	un.Object = obj
}
