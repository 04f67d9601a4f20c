package drift

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift/ignore"
)

// addTeamLabel adds a label Git does not mention.
var addTeamLabel = []string{`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"team": "platform"}}}
`, `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team}
spec:
  policyName: team
`}

func typeConverters(c *memory.Cluster) TypeConverters {
	return func(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
		return c.Chain().Registry().TypeConverter(gv)
	}
}

// argoSync writes desired as Argo CD's client-side apply does: with the
// last-applied-configuration annotation.
func argoSync(t *testing.T, c cluster.Cluster, desired *unstructured.Unstructured) {
	t.Helper()
	obj := desired.DeepCopy()
	b, err := json.Marshal(desired.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(b)})
	if _, err := c.Create(context.Background(), obj, cluster.WriteOptions{FieldManager: "argocd-controller"}); err != nil {
		t.Fatal(err)
	}
}

func TestArgoLegacy(t *testing.T) {
	ctx := context.Background()
	imageRule := ignore.Rule{Tool: ignore.ArgoCD, Field: "spec.ignoreDifferences[0]", Target: ignore.Target{Group: "apps", Kind: "Deployment"},
		JQPathExpressions: []string{".spec.template.spec.containers[].image"}}
	for _, tc := range []struct {
		name     string
		policies []string
		synced   bool
		rules    []ignore.Rule
		want     Status
		drifted  []string
		ignored  []string
	}{
		{name: "missing", want: Missing},
		{name: "synced, no admission", synced: true, want: InSync},
		// A mutation of a field Git sets always shows...
		{name: "image mirrored", policies: mirror, synced: true, want: Drifted,
			drifted: []string{"/spec/template/spec/containers/0/image"}},
		// ...and an added label Git does not mention does not, in the
		// three-way diff.
		{name: "label added", policies: addTeamLabel, synced: true, want: InSync},
		{name: "image mirrored, ignored by jq", policies: mirror, synced: true, rules: []ignore.Rule{imageRule}, want: InSync,
			ignored: []string{"/spec/template/spec/containers/0/image"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, p := range tc.policies {
				objs = append(objs, object(t, p))
			}
			c := newMemory(t, objs...)
			if tc.synced {
				argoSync(t, c, object(t, web))
			}
			var set *ignore.Set
			if len(tc.rules) > 0 {
				var err error
				if set, err = ignore.Compile(tc.rules, ignore.Options{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := NewArgoLegacy(c, set, typeConverters(c), Tracking{}, false).Diff(ctx, object(t, web))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.want {
				t.Fatalf("status = %s, want %s (fields %+v, notes %v)", got.Status, tc.want, got.Fields, got.Notes)
			}
			if g := pointers(got.Fields, false); !equal(g, tc.drifted) {
				t.Errorf("drifted = %v, want %v", g, tc.drifted)
			}
			if g := pointers(got.Fields, true); !equal(g, tc.ignored) {
				t.Errorf("ignored = %v, want %v", g, tc.ignored)
			}
			// The two documents compared: Git's image on the desired
			// side, whatever admission stored on the live side.
			image := func(doc map[string]any) any {
				containers, _, _ := unstructured.NestedSlice(doc, "spec", "template", "spec", "containers")
				if len(containers) == 0 {
					return nil
				}
				return containers[0].(map[string]any)["image"]
			}
			switch {
			case !tc.synced:
				if got.Desired != nil || got.Live != nil {
					t.Errorf("documents of a missing object: %v, %v", got.Desired, got.Live)
				}
			case len(tc.drifted) > 0:
				if d, l := image(got.Desired), image(got.Live); d != "nginx:1.27" || l != "registry.internal/nginx:1.27" {
					t.Errorf("images compared = %v (desired), %v (live)", d, l)
				}
			case len(tc.ignored) == 0:
				if got.Desired == nil || !reflect.DeepEqual(got.Desired, got.Live) {
					t.Errorf("documents of an object in sync differ:\n%v\n%v", got.Desired, got.Live)
				}
			}
		})
	}
}

func TestArgoServerSide(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		policies []string
		include  bool
		want     Status
		drifted  []string
	}{
		// Synced with SSA, the dry run repeats the mutation: no drift.
		{name: "image mirrored", policies: mirror, want: InSync},
		{name: "image mirrored, include webhook", policies: mirror, include: true, want: InSync},
		{name: "label added", policies: addTeamLabel, want: InSync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, p := range tc.policies {
				objs = append(objs, object(t, p))
			}
			c := newMemory(t, objs...)
			if _, err := c.Apply(ctx, object(t, web), cluster.ApplyOptions{FieldManager: "argocd-controller", Force: true}); err != nil {
				t.Fatal(err)
			}
			got, err := NewArgoServerSide(c, tc.include, nil, typeConverters(c), Tracking{}, false).Diff(ctx, object(t, web))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.want {
				t.Fatalf("status = %s, want %s (fields %+v, notes %v)", got.Status, tc.want, got.Fields, got.Notes)
			}
			if g := pointers(got.Fields, false); !equal(g, tc.drifted) {
				t.Errorf("drifted = %v, want %v", g, tc.drifted)
			}
		})
	}
	// No dry run for what does not exist yet.
	c := newMemory(t)
	calls := c.Calls()
	got, err := NewArgoServerSide(c, false, nil, typeConverters(c), Tracking{}, false).Diff(ctx, object(t, web))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != Missing || c.Calls()-calls != 1 {
		t.Errorf("missing object: status %s after %d requests, want Missing after 1 (the read)", got.Status, c.Calls()-calls)
	}
}
