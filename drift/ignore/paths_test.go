package ignore

import (
	"context"
	"reflect"
	"testing"
)

func TestPaths(t *testing.T) {
	live := obj(t, deploymentYAML)
	git := live.DeepCopy()
	labels := live.GetLabels()
	labels["hpa"] = "on" // added in the cluster, not in Git
	live.SetLabels(labels)
	cases := []struct {
		name  string
		rules []Rule
		want  []string
	}{
		{"flux pointer, two rules without target both count", []Rule{
			{Tool: Flux, JSONPointers: []string{"/spec/replicas"}},
			{Tool: Flux, JSONPointers: []string{"/metadata/annotations/team"}},
		}, []string{"/spec/replicas", "/metadata/annotations/team"}},
		{"pointer to a missing field is kept as written", []Rule{
			{Tool: Flux, JSONPointers: []string{"/spec/paused"}},
		}, []string{"/spec/paused"}},
		{"root path is the whole object", []Rule{
			{Tool: Flux, JSONPointers: []string{""}},
		}, []string{""}},
		{"duplicates dropped", []Rule{
			{Tool: Flux, JSONPointers: []string{"/spec/replicas"}},
			{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "*"}, JSONPointers: []string{"/spec/replicas"}},
		}, []string{"/spec/replicas"}},
		{"jq paths evaluated on the object", []Rule{
			{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, JQPathExpressions: []string{".spec.template.spec.containers[].image"}},
		}, []string{"/spec/template/spec/containers/0/image", "/spec/template/spec/containers/1/image"}},
		{"argo rules without a group select the core group only", []Rule{
			{Tool: ArgoCD, Target: Target{Kind: "Deployment"}, JSONPointers: []string{"/spec/replicas"}},
		}, nil},
		{"target not matching", []Rule{
			{Tool: Flux, JSONPointers: []string{"/spec/replicas"}, Target: Target{Kind: "StatefulSet"}},
		}, nil},
		{"label selector reads the selecting object, not the live labels", []Rule{
			{Tool: Flux, JSONPointers: []string{"/spec/replicas"}, Target: Target{LabelSelector: "hpa=on"}},
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.rules...)
			ms, err := s.Paths(context.Background(), git, live)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.Pointer)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPathsOfManagers(t *testing.T) {
	live := obj(t, `
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: shop
  managedFields:
  - manager: operator
    operation: Update
    apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1: {"f:data": {"f:owned": {}}}
data: {owned: x, mine: y}
`)
	s := mustCompile(t, Rule{Tool: ArgoCD, Target: Target{Kind: "ConfigMap"}, ManagedFieldsManagers: []string{"operator"}})
	ms, err := s.Paths(context.Background(), nil, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Pointer != "/data/owned" {
		t.Fatalf("%+v", ms)
	}
}
