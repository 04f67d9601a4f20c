package differential

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGenerateReproducible: a case depends on (seed, index) only, loads as
// a corpus case, and keeps the order-independence rules.
func TestGenerateReproducible(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 50; i++ {
		a, b := Generate(7, i), Generate(7, i)
		if a.String() != b.String() {
			t.Fatalf("case %d differs between two generations", i)
		}
		d, err := a.WriteTo(dir)
		if err != nil {
			t.Fatal(err)
		}
		c, err := LoadCase(d)
		if err != nil {
			t.Fatalf("%v\n%s", err, a)
		}
		deny, audit := 0, 0
		for _, doc := range c.Cluster {
			if doc.Object.GetKind() != "ValidatingAdmissionPolicyBinding" {
				continue
			}
			actions, _, _ := unstructured.NestedStringSlice(doc.Object.Object, "spec", "validationActions")
			for _, a := range actions {
				switch a {
				case "Deny":
					deny++
				case "Audit":
					audit++
				}
			}
		}
		if deny > 1 || audit > 1 {
			t.Errorf("case %d: %d Deny and %d Audit bindings\n%s", i, deny, audit, a)
		}
	}
	if Generate(7, 1).String() == Generate(8, 1).String() {
		t.Error("the seed does not matter")
	}
	if !strings.Contains(Generate(7, 3).String(), "seed7-case003") {
		t.Error("case name does not carry seed and index")
	}
}
