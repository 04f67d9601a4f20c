package drift

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
)

// denyUpdates refuses every update of a Deployment: the dry run of an
// object that exists is refused.
var denyUpdates = []string{`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: frozen}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}
  validations:
  - {expression: 'false', message: deployments are frozen}
`, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: frozen}
spec: {policyName: frozen, validationActions: [Deny]}
`}

func TestHelm(t *testing.T) {
	ctx := context.Background()
	setReplicas := func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "replicas")
	}
	replicasRule := FluxRule{Name: "spec.driftDetection.ignore[0]", IgnoreRule: jsondiff.IgnoreRule{
		Paths: []string{"/spec/replicas"}, Selector: &jsondiff.Selector{Kind: "Deployment"}}}
	for _, tc := range []struct {
		name     string
		policies []string
		applied  bool
		// edit is another manager's update after the install.
		edit    func(u *unstructured.Unstructured)
		rules   []FluxRule
		want    Status
		drifted []string
		ignored []string
		origin  string
		note    string
	}{
		{name: "not installed", want: Missing},
		{name: "installed, untouched", applied: true, want: InSync},
		{name: "hpa took replicas", applied: true, edit: setReplicas,
			want: Drifted, drifted: []string{"/spec/replicas"}, origin: "manager hpa (Update)"},
		{name: "hpa took replicas, ignored", applied: true, edit: setReplicas,
			rules: []FluxRule{replicasRule}, want: InSync, ignored: []string{"/spec/replicas"}},
		{name: "left out by its annotation", applied: true, edit: func(u *unstructured.Unstructured) {
			setReplicas(u)
			u.SetAnnotations(map[string]string{HelmDriftDetectionKey: HelmDriftDetectionDisabled})
		}, want: Excluded, note: HelmDriftDetectionKey},
		// The dry run includes admission: the mutation is on both sides.
		{name: "admission mutation", policies: mirror, applied: true, want: InSync},
		{name: "dry run refused", policies: denyUpdates, applied: true, want: Rejected, note: "deployments are frozen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, p := range tc.policies {
				objs = append(objs, object(t, p))
			}
			c := newMemory(t, objs...)
			if tc.applied {
				if _, err := c.Apply(ctx, object(t, web), cluster.ApplyOptions{FieldManager: HelmFieldManager}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.edit != nil {
				live, err := c.Get(ctx, cluster.RefOf(object(t, web)))
				if err != nil {
					t.Fatal(err)
				}
				tc.edit(live)
				if _, err := c.Update(ctx, live, cluster.WriteOptions{FieldManager: "hpa"}); err != nil {
					t.Fatal(err)
				}
			}
			ds, err := (&Helm{Cluster: c, Rules: tc.rules}).DiffRelease(ctx, []*unstructured.Unstructured{object(t, web)})
			if err != nil {
				t.Fatal(err)
			}
			got := ds[0].Object
			if got.Status != tc.want {
				t.Fatalf("status = %s, want %s (fields %+v, notes %v)", got.Status, tc.want, got.Fields, got.Notes)
			}
			if g := pointers(got.Fields, false); !equal(g, tc.drifted) {
				t.Errorf("drifted fields = %v, want %v", g, tc.drifted)
			}
			if g := pointers(got.Fields, true); !equal(g, tc.ignored) {
				t.Errorf("ignored fields = %v, want %v", g, tc.ignored)
			}
			if tc.origin != "" && (len(got.Fields) == 0 || got.Fields[0].Origin != tc.origin) {
				t.Errorf("origin = %+v, want %q", got.Fields, tc.origin)
			}
			if tc.note != "" && !strings.Contains(strings.Join(got.Notes, "; "), tc.note) {
				t.Errorf("notes %v, want one saying %q", got.Notes, tc.note)
			}
			// What helm-controller corrects with: the patch of a drifted
			// object, nothing for a refused one.
			switch {
			case tc.want == Rejected && ds[0].Diff != nil:
				t.Errorf("a refused dry run has a diff to correct: %+v", ds[0].Diff)
			case tc.want == Drifted && (ds[0].Diff == nil || ds[0].Diff.Type != jsondiff.DiffTypeUpdate || len(ds[0].Diff.Patch) == 0):
				t.Errorf("diff %+v, want a patch", ds[0].Diff)
			}
		})
	}
}
