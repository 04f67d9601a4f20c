package ignore

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIgnoredBy(t *testing.T) {
	replicas := Rule{Tool: ArgoCD, Source: "app.yaml:1", Target: Target{Group: "apps", Kind: "Deployment", Name: "web"}, JSONPointers: []string{"/spec/replicas"}}
	proxy := Rule{Tool: ArgoCD, Source: "app.yaml:2", Target: Target{Group: "apps", Kind: "Deployment"},
		JQPathExpressions: []string{`.spec.template.spec.containers[] | select(.name == "istio-proxy")`}}
	managers := Rule{Tool: ArgoCD, Source: "argocd-cm.yaml:3", Target: Target{Group: "*", Kind: "*"}, ManagedFieldsManagers: []string{"kyverno"}}
	flux := Rule{Tool: Flux, Source: "ks.yaml:4", Target: Target{Kind: "Service"}, JSONPointers: []string{""}}
	lastContainer := Rule{Tool: Flux, Source: "ks.yaml:5", Target: Target{Kind: "Deployment"}, JSONPointers: []string{"/spec/template/spec/containers/-1/image"}}
	s := mustCompile(t, replicas, proxy, managers, flux, lastContainer)

	objs := map[string]*unstructured.Unstructured{
		"deploy": obj(t, deploymentYAML),
		"live":   obj(t, liveDeploymentYAML),
		"svc":    obj(t, serviceYAML),
		"cm":     obj(t, configMapYAML),
	}
	tests := []struct {
		name    string
		obj     string
		pointer string
		want    string // Source of the rule, "" for none
	}{
		{"exact pointer", "deploy", "/spec/replicas", "app.yaml:1"},
		{"below a pointer", "deploy", "/spec/replicas/x", "app.yaml:1"},
		{"sibling", "deploy", "/spec/paused", ""},
		{"parent is not ignored", "deploy", "/spec", ""},
		{"jq list item by content", "deploy", "/spec/template/spec/containers/1/name", "app.yaml:2"},
		{"negative index resolved on the object", "deploy", "/spec/template/spec/containers/1/image", "app.yaml:2"},
		{"jq other item", "deploy", "/spec/template/spec/containers/0/image", ""},
		{"manager-owned field in live", "live", "/spec/template/spec/containers/1/image", "argocd-cm.yaml:3"},
		{"field owned by another manager", "live", "/metadata/labels/app", ""},
		{"list item itself is not owned", "live", "/spec/template/spec/containers/1/name", ""},
		{"flux root ignores everything", "svc", "/spec/clusterIP", "ks.yaml:4"},
		{"flux negative index", "live", "/spec/template/spec/containers/1/image", "argocd-cm.yaml:3"},
		{"no rule for the kind", "cm", "/data/key", ""},
		{"invalid pointer", "deploy", "spec/replicas", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.IgnoredBy(objs[tt.obj], tt.pointer)
			got := ""
			if r != nil {
				got = r.Source
			}
			if got != tt.want {
				t.Fatalf("IgnoredBy(%s, %q) = %q, want %q", tt.obj, tt.pointer, got, tt.want)
			}
		})
	}
	// The Flux rule with a negative index names the last container.
	deploy := obj(t, deploymentYAML)
	deploy.SetName("other") // not selected by app.yaml:1
	only := mustCompile(t, lastContainer)
	if r := only.IgnoredBy(deploy, "/spec/template/spec/containers/1/image"); r == nil || r.Source != "ks.yaml:5" {
		t.Fatalf("negative index: got %v", r)
	}
	if r := only.IgnoredBy(deploy, "/spec/template/spec/containers/0/image"); r != nil {
		t.Fatalf("negative index matched the first container: %v", r.Source)
	}
}
