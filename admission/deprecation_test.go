package admission_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// A write to a custom resource version its CRD marks deprecated carries
// the warning the CRD handler gives: the CRD's own deprecationWarning,
// else a default naming the newest served version that is not deprecated.
func TestCRDVersionDeprecation(t *testing.T) {
	const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.dep.truce.dev}
spec:
  group: dep.truce.dev
  scope: Cluster
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - {name: v5, served: true, storage: false, deprecated: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v3, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v2, served: true, storage: false, deprecated: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v2beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1, served: true, storage: false, deprecated: true, deprecationWarning: "gadgets v1 go away; use v3", schema: {openAPIV3Schema: {type: object}}}
  - {name: v1alpha1, served: true, storage: false, deprecated: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v4alpha1, served: true, storage: false, deprecated: true, schema: {openAPIV3Schema: {type: object}}}
`
	tests := []struct {
		version string
		want    string // "" for no warning
	}{
		{"v3", ""},
		{"v2beta1", ""},
		{"v1", "gadgets v1 go away; use v3"},
		{"v2", "dep.truce.dev/v2 Gadget is deprecated; use dep.truce.dev/v3 Gadget"},
		// Newer than every version that is not deprecated: none to name.
		{"v5", "dep.truce.dev/v5 Gadget is deprecated"},
		// An alpha is older than any GA version, whatever its number.
		{"v4alpha1", "dep.truce.dev/v4alpha1 Gadget is deprecated; use dep.truce.dev/v3 Gadget"},
		// v2beta1 and v3 are newer; the newest is named.
		{"v1alpha1", "dep.truce.dev/v1alpha1 Gadget is deprecated; use dep.truce.dev/v3 Gadget"},
	}
	c := newChain(t, admission.Options{}, crd)
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			res := admit(t, c, admission.Request{Object: object(t, "apiVersion: dep.truce.dev/"+tt.version+"\nkind: Gadget\nmetadata: {name: g}\n")})
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			deprecations := slices.DeleteFunc(slices.Clone(res.Warnings), func(w string) bool { return !strings.Contains(w, "deprecated") && !strings.Contains(w, "go away") })
			var want []string
			if tt.want != "" {
				want = []string{tt.want}
			}
			if !slices.Equal(deprecations, want) {
				t.Errorf("warnings %q, want %q", res.Warnings, want)
			}
		})
	}
}
