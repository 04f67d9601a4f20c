package world

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

func TestDestination(t *testing.T) {
	cases := []struct {
		name, kind, doc, want string
	}{
		{"Argo CD's own cluster by address", KindApplication, "spec: {destination: {server: 'https://kubernetes.default.svc'}}", ""},
		{"Argo CD's own cluster by name", KindApplication, "spec: {destination: {name: in-cluster}}", ""},
		{"another cluster by address", KindApplication, "spec: {destination: {server: 'https://prod.example.com'}}", "https://prod.example.com"},
		{"another cluster by name", KindApplication, "spec: {destination: {name: prod}}", "cluster prod"},
		{"a Kustomization of this cluster", KindKustomization, "spec: {path: ./apps}", ""},
		{"a Kustomization with a kubeConfig", KindKustomization, "spec: {kubeConfig: {secretRef: {name: prod-kubeconfig}}}", "kubeConfig flux-system/prod-kubeconfig"},
		{"a HelmRelease with a kubeConfig", KindHelmRelease, "spec: {kubeConfig: {secretRef: {name: edge}}}", "kubeConfig flux-system/edge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.doc), &m); err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: m}
			obj.SetNamespace("flux-system")
			if got := destination(obj, tc.kind); got != tc.want {
				t.Errorf("destination %q, want %q", got, tc.want)
			}
		})
	}
}

// An app of apps applies its Applications wave by wave; units of other
// parents and Flux units keep their places.
func TestOrderFollowsSyncWaves(t *testing.T) {
	root := manifest.Unit{Kind: KindApplication, Namespace: "argocd", Name: "root"}
	app := func(name string, wave int, parent manifest.Unit) *Unit {
		return &Unit{Unit: manifest.Unit{Kind: KindApplication, Namespace: "argocd", Name: name}, Wave: wave, Parent: parent}
	}
	k := func(name string, deps ...string) *Unit {
		u := &Unit{Unit: manifest.Unit{Kind: KindKustomization, Namespace: "flux-system", Name: name}}
		for _, d := range deps {
			u.DependsOn = append(u.DependsOn, manifest.Unit{Kind: KindKustomization, Namespace: "flux-system", Name: d})
		}
		return u
	}
	units := []*Unit{
		app("root", 0, manifest.Unit{}), app("db", 2, root), k("apps", "infra"), app("web", 5, root),
		app("crds", -1, root), k("infra"), app("cache", 2, root),
	}
	var got []string
	for _, u := range order(units) {
		got = append(got, u.Name)
	}
	if want := "root,crds,infra,apps,db,cache,web"; strings.Join(got, ",") != want {
		t.Errorf("order %s, want %s", strings.Join(got, ","), want)
	}
}
