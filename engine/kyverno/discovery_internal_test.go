package kyverno

import (
	"slices"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// The discovery the helper gets lists each group's preferred version
// first: client-go's fake discovery takes the first for the preferred one,
// which Kyverno's ServerPreferredResources reads.
func TestDiscoveryPreferredFirst(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry(crds)
	if err != nil {
		t.Fatal(err)
	}
	byGroup := map[string][]string{}
	for _, l := range discovery(reg) {
		gv, err := k8sschema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		byGroup[gv.Group] = append(byGroup[gv.Group], gv.Version)
	}
	for group, want := range map[string][]string{
		"autoscaling": {"v2", "v1"},
		"kyverno.io":  {"v2", "v1", "v2beta1"},
	} {
		if got := byGroup[group]; !slices.Equal(got, want) {
			t.Errorf("%s: versions %v, want %v", group, got, want)
		}
	}
}
