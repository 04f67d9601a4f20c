package admission

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/truce-dev/truce/manifest"
)

// Probe is an object to try mutations on: truce webhook serve refuses a
// set of mutating policies that is not idempotent on its probes, and the
// lint rules on mutating policies run the policies on them.
type Probe struct {
	// Source says where it comes from: "file:line", or what was made up.
	Source    string
	GVK       k8sschema.GroupVersionKind
	Namespace string
	Name      string
	// Body is the object as JSON.
	Body []byte
}

// Review is the CREATE of body (the probe, or what became of it) by a
// cluster admin, attributed.
func (p Probe) Review(body []byte) Review {
	return Review{
		Operation: Create, Kind: p.GVK, Namespace: p.Namespace, Name: p.Name, Object: body,
		UserInfo: &user.DefaultInfo{Name: "system:admin", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
		DryRun:   true, Attribute: true,
	}
}

// probeKinds are the kinds synthesised for policies matching them; the pod
// template kinds carry a container, what most mutations touch.
var probeKinds = []struct {
	gvk      k8sschema.GroupVersionKind
	resource string
	spec     func(labels map[string]any) map[string]any
}{
	{k8sschema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", func(map[string]any) map[string]any { return probePodSpec() }},
	{k8sschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", probeWorkloadSpec},
	{k8sschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "statefulsets", probeWorkloadSpec},
	{k8sschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, "daemonsets", probeWorkloadSpec},
	{k8sschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "replicasets", probeWorkloadSpec},
	{k8sschema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "jobs", func(l map[string]any) map[string]any {
		return map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": l}, "spec": probeRestartNever(probePodSpec())}}
	}},
	{k8sschema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", nil},
	{k8sschema.GroupVersionKind{Version: "v1", Kind: "Service"}, "services", func(l map[string]any) map[string]any {
		return map[string]any{"selector": l, "ports": []any{map[string]any{"port": int64(80)}}}
	}},
}

func probePodSpec() map[string]any {
	return map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27"}}}
}

func probeRestartNever(spec map[string]any) map[string]any {
	spec["restartPolicy"] = "Never"
	return spec
}

func probeWorkloadSpec(labels map[string]any) map[string]any {
	return map[string]any{
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": probePodSpec()},
	}
}

// Probes returns objects to try the mutating policies of state on: the
// samples that are not admission configuration, and for every kind the
// policies match a small object of that kind in every namespace of the
// state, labelled as the policies' and bindings' object selectors ask.
func Probes(state *State, samples []manifest.Object) []Probe {
	var out []Probe
	for _, s := range samples {
		u := s.Object
		switch u.GetKind() {
		case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
			"ValidatingAdmissionPolicyBinding", "CustomResourceDefinition", "Namespace":
			continue
		}
		body, err := json.Marshal(u.Object)
		if err != nil {
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		out = append(out, Probe{Source: s.Source.String(), GVK: u.GroupVersionKind(), Namespace: ns, Name: u.GetName(), Body: body})
	}
	resources, labels := mutatedResources(state)
	namespaces := []string{"default"}
	for _, o := range state.Objects() {
		if o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" && !probeSkipsNamespace(o.GetName()) && o.GetName() != "default" {
			namespaces = append(namespaces, o.GetName())
		}
	}
	for _, k := range probeKinds {
		if !resources[k.gvk.Group+"/"+k.resource] {
			continue
		}
		for _, ns := range namespaces {
			l := map[string]any{"app": "truce-probe"}
			for k, v := range labels {
				l[k] = v
			}
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetGroupVersionKind(k.gvk)
			u.SetName("truce-probe")
			u.SetNamespace(ns)
			u.SetLabels(probeLabelValues(l))
			if k.spec != nil {
				u.Object["spec"] = k.spec(l)
			}
			body, err := json.Marshal(u.Object)
			if err != nil {
				continue
			}
			out = append(out, Probe{Source: fmt.Sprintf("a probe %s in namespace %s", k.gvk.Kind, ns), GVK: k.gvk, Namespace: ns, Name: "truce-probe", Body: body})
		}
	}
	return out
}

func probeSkipsNamespace(name string) bool {
	return name == "kube-system" || name == "kube-public" || name == "kube-node-lease"
}

func probeLabelValues(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// mutatedResources returns the "group/resource" pairs the mutating policies
// match (a "*" matches every probe kind) and the labels their object
// selectors and their bindings' require.
func mutatedResources(state *State) (map[string]bool, map[string]any) {
	resources := map[string]bool{}
	labels := map[string]any{}
	for _, o := range state.Objects() {
		switch o.GetKind() {
		case "MutatingAdmissionPolicy":
			rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "matchConstraints", "resourceRules")
			for _, r := range rules {
				rule, _ := r.(map[string]any)
				groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
				names, _, _ := unstructured.NestedStringSlice(rule, "resources")
				for _, k := range probeKinds {
					if anyMatches(groups, k.gvk.Group) && anyMatches(names, k.resource) {
						resources[k.gvk.Group+"/"+k.resource] = true
					}
				}
			}
			addProbeSelectorLabels(labels, o.Object, "spec", "matchConstraints", "objectSelector", "matchLabels")
		case "MutatingAdmissionPolicyBinding":
			addProbeSelectorLabels(labels, o.Object, "spec", "matchResources", "objectSelector", "matchLabels")
		}
	}
	return resources, labels
}

func anyMatches(patterns []string, v string) bool {
	for _, p := range patterns {
		if p == "*" || p == v {
			return true
		}
	}
	return false
}

func addProbeSelectorLabels(into map[string]any, obj map[string]any, path ...string) {
	m, _, _ := unstructured.NestedStringMap(obj, path...)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		into[k] = m[k]
	}
}
