package kyverno_test

import (
	"os"
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
)

func readExample(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A MutatingPolicy with mutateExisting becomes a writer that patches its
// targets after a trigger's admission, with what Kyverno's background
// processor writes; Kyverno's own write does not trigger it again.
func TestMutateExistingWriter(t *testing.T) {
	policy := readExample(t, "../../examples/kyverno-mutate-existing/cluster/kyverno-policies.yaml")
	ctx, c, bg := generateEnv(t, policy, `
apiVersion: v1
kind: Namespace
metadata: {name: web, labels: {team: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: web, labels: {tier: web}}
`)
	if u := bg.Unpredictable(); len(u) != 0 {
		t.Fatalf("unpredictable: %v", u)
	}
	ws := bg.Writers()
	if len(ws) != 1 {
		t.Fatalf("%d writers, want 1", len(ws))
	}
	w := ws[0]
	want := "Kyverno MutatingPolicy label-team-configmaps mutates existing v1/ConfigMap after each admission of a v1/Namespace"
	if w.Describe() != want {
		t.Errorf("describe %q\nwant     %q", w.Describe(), want)
	}
	if !w.Watches(ref("Namespace", "", "v1", "", "web")) || w.Watches(ref("ConfigMap", "", "v1", "web", "settings")) {
		t.Error("it should watch Namespaces (its triggers), not ConfigMaps (its targets)")
	}
	for _, o := range objs(t, `
apiVersion: v1
kind: Namespace
metadata: {name: web, labels: {team: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: web, labels: {tier: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: shop, labels: {tier: shop}}
`) {
		if _, err := c.Create(ctx, o, cluster.WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Act(ctx, c); err != nil {
		t.Fatal(err)
	}
	cm := get(t, ctx, c, ref("ConfigMap", "", "v1", "web", "settings"))
	if cm.GetLabels()["tier"] != "platform" {
		t.Fatalf("target labels %v, want tier=platform", cm.GetLabels())
	}
	if other := get(t, ctx, c, ref("ConfigMap", "", "v1", "shop", "other")); other.GetLabels()["tier"] != "shop" {
		t.Errorf("a ConfigMap outside the targets' namespaces was patched: %v", other.GetLabels())
	}
	managers := []string{}
	for _, m := range cm.GetManagedFields() {
		managers = append(managers, m.Manager)
	}
	if !strings.Contains(strings.Join(managers, ","), "kyverno-background-controller") {
		t.Errorf("managers %v", managers)
	}
	// Reverting the target is no admission of a trigger: Kyverno waits
	// for the next one.
	cm.SetLabels(map[string]string{"tier": "web"})
	if _, err := c.Update(ctx, cm, cluster.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Act(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := get(t, ctx, c, ref("ConfigMap", "", "v1", "web", "settings")).GetLabels()["tier"]; got != "web" {
		t.Errorf("patched again without a trigger: tier=%s", got)
	}
	ns := get(t, ctx, c, ref("Namespace", "", "v1", "", "web"))
	ns.SetAnnotations(map[string]string{"touched": "yes"})
	if _, err := c.Update(ctx, ns, cluster.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Act(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := get(t, ctx, c, ref("ConfigMap", "", "v1", "web", "settings")).GetLabels()["tier"]; got != "platform" {
		t.Errorf("not patched after the trigger's UPDATE: tier=%s", got)
	}
}

// A MutatingPolicy Kyverno turns into a MutatingAdmissionPolicy never
// reaches Kyverno's webhook, so no admission creates the UpdateRequest
// that mutates existing objects: it is no background writer.
func TestMutateExistingGenerated(t *testing.T) {
	policy := readExample(t, "../../examples/kyverno-mutate-existing/cluster/kyverno-policies.yaml")
	generated := strings.Replace(policy, "\nspec:\n", "\nspec:\n  autogen: {mutatingAdmissionPolicy: {enabled: true}}\n", 1)
	if generated == policy {
		t.Fatal("the example changed: no spec to add autogen to")
	}
	_, _, bg := generateEnv(t, generated)
	if ws := bg.Writers(); len(ws) != 0 {
		var names []string
		for _, w := range ws {
			names = append(names, w.Describe())
		}
		t.Fatalf("writers %v, want none: Kyverno generated a MutatingAdmissionPolicy for the policy", names)
	}
}

// legacyMutateExisting is a ClusterPolicy whose rule mutates existing
// ConfigMaps (mutate.targets) of each Namespace labelled team.
const legacyMutateExisting = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: label-team-configmaps}
spec:
  rules:
  - name: label-configmaps
    match:
      any:
      - resources:
          kinds: [Namespace]
          selector: {matchExpressions: [{key: team, operator: Exists}]}
    mutate:
      targets:
      - apiVersion: v1
        kind: ConfigMap
        namespace: "{{request.object.metadata.name}}"
      patchStrategicMerge:
        metadata:
          labels:
            tier: platform
`

// A ClusterPolicy rule with mutate.targets becomes a writer that patches
// its targets after each admission of a matching trigger, with what
// Kyverno's mutate-existing controller writes for the UpdateRequest.
func TestMutateTargetsWriter(t *testing.T) {
	tests := []struct {
		name      string
		namespace string // the trigger, created before the writer acts
		patched   map[string]string
	}{
		{
			name:      "a matching trigger patches the ConfigMaps of its namespace",
			namespace: "{name: web, labels: {team: web}}",
			patched:   map[string]string{"web/settings": "platform", "web/other": "platform", "shop/elsewhere": "shop"},
		},
		{
			name:      "a trigger the rule does not match patches nothing",
			namespace: "{name: web}",
			patched:   map[string]string{"web/settings": "web", "web/other": "web", "shop/elsewhere": "shop"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c, bg := generateEnv(t, legacyMutateExisting)
			if u := bg.Unpredictable(); len(u) != 0 {
				t.Fatalf("unpredictable: %v", u)
			}
			ws := bg.Writers()
			if len(ws) != 1 {
				t.Fatalf("%d writers, want 1", len(ws))
			}
			w := ws[0]
			want := "Kyverno mutate-existing rule label-configmaps of policy label-team-configmaps mutates existing v1/ConfigMap after each admission of a Namespace"
			if w.Describe() != want {
				t.Errorf("describe %q\nwant     %q", w.Describe(), want)
			}
			if !w.Watches(ref("Namespace", "", "v1", "", "web")) || w.Watches(ref("ConfigMap", "", "v1", "web", "settings")) {
				t.Error("it should watch Namespaces (its triggers), not ConfigMaps (its targets)")
			}
			for _, o := range objs(t, `
apiVersion: v1
kind: Namespace
metadata: `+tc.namespace+`
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: web, labels: {tier: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: web, labels: {tier: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: shop, labels: {tier: shop}}
`) {
				if _, err := c.Create(ctx, o, cluster.WriteOptions{FieldManager: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Act(ctx, c); err != nil {
				t.Fatal(err)
			}
			for name, tier := range tc.patched {
				ns, n, _ := strings.Cut(name, "/")
				if got := get(t, ctx, c, ref("ConfigMap", "", "v1", ns, n)).GetLabels()["tier"]; got != tier {
					t.Errorf("ConfigMap %s: tier=%s, want %s", name, got, tier)
				}
			}
		})
	}
}

// A mutate-existing rule reading what truce cannot give Kyverno offline
// gets no writer but a finding naming it.
func TestMutateTargetsUnpredictable(t *testing.T) {
	policy := strings.Replace(legacyMutateExisting, "    mutate:\n", `    context:
    - name: owners
      apiCall:
        service: {url: "https://owners.example.com/teams"}
    mutate:
`, 1)
	_, _, bg := generateEnv(t, policy)
	if ws := bg.Writers(); len(ws) != 0 {
		t.Errorf("%d writers, want none", len(ws))
	}
	want := `Kyverno mutate-existing rule label-configmaps of policy label-team-configmaps: context entry "owners" calls the service https://owners.example.com/teams`
	if u := bg.Unpredictable(); len(u) != 1 || u[0] != want {
		t.Errorf("unpredictable %q\nwant %q", u, want)
	}
}
