package ignore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIneffective(t *testing.T) {
	deploy, svc, cm := obj(t, deploymentYAML), obj(t, serviceYAML), obj(t, configMapYAML)
	live := obj(t, liveDeploymentYAML)
	live.SetName("api")
	noAnnotations := obj(t, deploymentYAML)
	noAnnotations.SetName("bare")
	noAnnotations.SetAnnotations(nil)
	objs := []*unstructured.Unstructured{deploy, svc, cm, live}
	appsDeploy := Target{Group: "apps", Kind: "Deployment"}

	tests := []struct {
		name string
		rule Rule
		objs []*unstructured.Unstructured
		want []Finding // Rule is filled in by the test
	}{
		{
			name: "unescaped slash in an annotation key that exists",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, JSONPointers: []string{"/metadata/annotations/example.com/config-hash"}},
			want: []Finding{{Pointer: "/metadata/annotations/example.com/config-hash", Kind: NoEffect,
				Message: `jsonPointers entry "/metadata/annotations/example.com/config-hash" has no effect: "/" inside a key must be written "~1" (did you mean "/metadata/annotations/example.com~1config-hash"?)`}},
		},
		{
			name: "unescaped slash in a key no object has yet",
			rule: Rule{Tool: Flux, Target: Target{Kind: "Deployment", Name: "bare"}, JSONPointers: []string{"/metadata/annotations/example.com/config-hash"}},
			objs: []*unstructured.Unstructured{noAnnotations},
			want: []Finding{{Pointer: "/metadata/annotations/example.com/config-hash", Kind: NoEffect,
				Message: `paths entry "/metadata/annotations/example.com/config-hash" has no effect: "/" inside a key must be written "~1" (did you mean "/metadata/annotations/example.com~1config-hash"?)`}},
		},
		{
			name: "escaped key works",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, JSONPointers: []string{"/metadata/annotations/example.com~1config-hash"}},
		},
		{
			name: "list index that matches is fragile",
			rule: Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment", Name: "web"}, JSONPointers: []string{"/spec/template/spec/containers/0/image"}},
			want: []Finding{{Pointer: "/spec/template/spec/containers/0/image", Kind: Fragile,
				Message: `jsonPointers entry "/spec/template/spec/containers/0/image" names a list item by position (item 0 of /spec/template/spec/containers): it ignores a different item, or nothing, once the list is reordered or grows; select the item by content instead: jqPathExpressions: [".spec.template.spec.containers[] | select(.name == \"web\") | .image"]`}},
		},
		{
			name: "list index that matches nothing",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, JSONPointers: []string{"/spec/template/spec/containers/5/image"}},
			want: []Finding{{Pointer: "/spec/template/spec/containers/5/image", Kind: NoEffect,
				Message: `jsonPointers entry "/spec/template/spec/containers/5/image" has no effect: it names a list item by position and none of the 2 objects the target matches has that item; select list items by content with jqPathExpressions`}},
		},
		{
			name: "missing field",
			rule: Rule{Tool: Flux, Target: Target{Kind: "Service"}, JSONPointers: []string{"/spec/replicas", "/spec/clusterIP"}},
			want: []Finding{{Pointer: "/spec/replicas", Kind: NoEffect,
				Message: `paths entry "/spec/replicas" has no effect: none of the 1 objects the target matches has this field`}},
		},
		{
			name: "flux kind not anchored as the user thought",
			rule: Rule{Tool: Flux, Target: Target{Kind: "Deploy"}, JSONPointers: []string{"/spec/replicas"}},
			want: []Finding{{Kind: NoEffect,
				Message: `target {kind: Deploy} matches none of the 4 objects: target fields are anchored regular expressions, so kind "Deploy" does not match "Deployment"`}},
		},
		{
			name: "argo empty group is core",
			rule: Rule{Tool: ArgoCD, Target: Target{Kind: "Deployment"}, JSONPointers: []string{"/spec/replicas"}},
			want: []Finding{{Kind: NoEffect,
				Message: `target {kind: Deployment} matches none of the 4 objects: an empty group is the core group only, and Deployment is in group "apps"`}},
		},
		{
			name: "jq that selects nothing",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, JQPathExpressions: []string{`.spec.template.spec.containers[] | select(.name == "linkerd-proxy")`}},
			want: []Finding{{Kind: NoEffect,
				Message: `jqPathExpressions entry ".spec.template.spec.containers[] | select(.name == \"linkerd-proxy\")" has no effect: it selects no field in the 2 objects the target matches`}},
		},
		{
			name: "jq that fails everywhere",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, JQPathExpressions: []string{`.spec.template.spec.initContainers[].image`}},
			want: []Finding{{Kind: NoEffect,
				Message: `jqPathExpressions entry ".spec.template.spec.initContainers[].image" has no effect: it fails on Deployment shop/web (cannot iterate over: null), and Argo CD skips an expression that fails`}},
		},
		{
			name: "jq that works",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, JQPathExpressions: []string{`.spec.template.spec.containers[].image`}},
		},
		{
			name: "manager that owns nothing",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy, ManagedFieldsManagers: []string{"kyverno", "vpa-recommender"}},
			want: []Finding{{Kind: NoEffect,
				Message: `managedFieldsManagers entry "vpa-recommender" has no effect: it owns no field of the 2 objects the target matches (their managers: argocd-controller, kube-controller-manager, kyverno)`}},
		},
		{
			name: "empty rule",
			rule: Rule{Tool: ArgoCD, Target: appsDeploy},
			want: []Finding{{Kind: NoEffect, Message: "rule has no jsonPointers and ignores nothing"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.rule)
			in := tt.objs
			if in == nil {
				in = objs
			}
			got := s.Ineffective(in)
			for i := range tt.want {
				tt.want[i].Rule = s.Rules()[0]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Ineffective (-want +got):\n%s", diff)
			}
		})
	}
}
