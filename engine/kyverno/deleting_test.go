package kyverno_test

import (
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/cluster"
)

// deletingPolicy is a DeletingPolicy (kind and namespace given) on
// ConfigMaps, every ten minutes, with extra spec lines.
func deletingPolicy(kind, namespace, spec string) string {
	ns := ""
	if namespace != "" {
		ns = ", namespace: " + namespace
	}
	return `
apiVersion: policies.kyverno.io/v1
kind: ` + kind + `
metadata: {name: cleanup` + ns + `}
spec:
  schedule: "*/10 * * * *"
` + spec
}

const configMapRules = `
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      resources: [configmaps]
`

const deletingObjects = `
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: shop, labels: {temporary: "yes"}}
data: {mode: debug}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: shop}
data: {mode: production}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: team-a, labels: {temporary: "yes"}}
data: {mode: debug}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: d, namespace: kube-system, labels: {temporary: "yes"}}
data: {mode: debug}
`

// The writers derived from DeletingPolicies delete, when their schedule
// comes, what Kyverno's deleting controller deletes: what matchConstraints
// and conditions select, never what Kyverno's resource filters exclude
// (kube-system), within its namespace for a NamespacedDeletingPolicy,
// except what a PolicyException spares.
func TestDeletingWriters(t *testing.T) {
	tests := []struct {
		name     string
		policies []string
		describe string
		deleted  []string // ConfigMaps, namespace/name; the others stay
	}{
		{
			name:     "every ConfigMap it matches, outside the filtered namespaces",
			policies: []string{deletingPolicy("DeletingPolicy", "", configMapRules)},
			describe: `Kyverno DeletingPolicy cleanup deletes the v1/ConfigMap it matches on its schedule "*/10 * * * *"`,
			deleted:  []string{"shop/a", "shop/b", "team-a/c"},
		},
		{
			name: "conditions",
			policies: []string{deletingPolicy("DeletingPolicy", "", configMapRules+`
  conditions:
  - name: debug
    expression: object.data.mode == "debug"
`)},
			deleted: []string{"shop/a", "team-a/c"},
		},
		{
			name: "objectSelector and namespaceSelector",
			policies: []string{deletingPolicy("DeletingPolicy", "", configMapRules+`
    objectSelector: {matchLabels: {temporary: "yes"}}
    namespaceSelector: {matchLabels: {env: prod}}
`)},
			deleted: []string{"team-a/c"},
		},
		{
			name:     "namespaced: only its own namespace",
			policies: []string{deletingPolicy("NamespacedDeletingPolicy", "shop", configMapRules)},
			describe: `Kyverno NamespacedDeletingPolicy shop/cleanup deletes the v1/ConfigMap it matches on its schedule "*/10 * * * *"`,
			deleted:  []string{"shop/a", "shop/b"},
		},
		{
			name: "a PolicyException spares what it matches",
			policies: []string{deletingPolicy("DeletingPolicy", "", configMapRules), `
apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata: {name: keep-production, namespace: shop}
spec:
  policyRefs:
  - {name: cleanup, kind: DeletingPolicy}
  matchConditions:
  - name: production
    expression: object.data.mode == "production"
`},
			deleted: []string{"shop/a", "team-a/c"},
		},
		{
			name: "nothing matches",
			policies: []string{deletingPolicy("DeletingPolicy", "", configMapRules+`
  conditions:
  - name: never
    expression: object.data.mode == "staging"
`)},
		},
	}
	all := []string{"shop/a", "shop/b", "team-a/c", "kube-system/d"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c, bg := generateEnv(t, tc.policies...)
			if u := bg.Unpredictable(); len(u) != 0 {
				t.Fatalf("unpredictable: %v", u)
			}
			ws := bg.Writers()
			if len(ws) != 1 {
				t.Fatalf("%d writers, want 1", len(ws))
			}
			w := ws[0]
			if tc.describe != "" && w.Describe() != tc.describe {
				t.Errorf("describe %q\nwant     %q", w.Describe(), tc.describe)
			}
			if w.Name() != "kyverno-cleanup-controller" {
				t.Errorf("name %q", w.Name())
			}
			if w.Watches(ref("ConfigMap", "", "v1", "shop", "a")) {
				t.Error("a scheduled writer should watch nothing")
			}
			for _, o := range objs(t, deletingObjects) {
				if _, err := c.Create(ctx, o, cluster.WriteOptions{FieldManager: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Act(ctx, c); err != nil {
				t.Fatal(err)
			}
			for _, name := range all {
				ns, n, _ := strings.Cut(name, "/")
				gone := get(t, ctx, c, ref("ConfigMap", "", "v1", ns, n)) == nil
				want := false
				for _, d := range tc.deleted {
					want = want || d == name
				}
				if gone != want {
					t.Errorf("ConfigMap %s deleted: %v, want %v", name, gone, want)
				}
			}
		})
	}
}

// A DeletingPolicy acts at the times of its cron schedule, counted from
// simulate.Epoch (a Monday, midnight UTC) as Kyverno counts them from its
// last execution.
func TestDeletingSchedule(t *testing.T) {
	type step struct{ after, next time.Duration }
	tests := []struct {
		schedule string
		steps    []step
	}{
		{"*/10 * * * *", []step{{0, 10 * time.Minute}, {10 * time.Minute, 20 * time.Minute}, {25 * time.Minute, 30 * time.Minute}}},
		{"0 2 * * *", []step{{0, 2 * time.Hour}, {2 * time.Hour, 26 * time.Hour}}},
		// Epoch is itself a Monday midnight: the next is a week later.
		{"0 0 * * 1", []step{{0, 7 * 24 * time.Hour}}},
		// As supercronic reads them: seven fields start with the
		// seconds, six end with the year.
		{"*/30 * * * * * *", []step{{0, 30 * time.Second}, {time.Minute, 90 * time.Second}}},
		{"*/30 * * * * *", []step{{0, 30 * time.Minute}}},
		// No time in the future: the writer never acts.
		{"0 0 1 1 * 2020", nil},
	}
	for _, tc := range tests {
		t.Run(tc.schedule, func(t *testing.T) {
			policy := strings.Replace(deletingPolicy("DeletingPolicy", "", configMapRules), `"*/10 * * * *"`, `"`+tc.schedule+`"`, 1)
			_, _, bg := generateEnv(t, policy)
			ws := bg.Writers()
			if len(ws) != 1 {
				t.Fatalf("%d writers, want 1 (unpredictable: %v)", len(ws), bg.Unpredictable())
			}
			s, ok := ws[0].(interface {
				Next(time.Duration) (time.Duration, bool)
			})
			if !ok {
				t.Fatal("the writer has no schedule")
			}
			if tc.steps == nil {
				if at, ok := s.Next(0); ok {
					t.Errorf("next %s, want none", at)
				}
			}
			for _, st := range tc.steps {
				if got, ok := s.Next(st.after); !ok || got != st.next {
					t.Errorf("next after %s: %s (%v), want %s", st.after, got, ok, st.next)
				}
			}
		})
	}
}

// What a DeletingPolicy reads that truce cannot give Kyverno offline (the
// wall clock, services outside the cluster), or a schedule Kyverno cannot
// read, gives no writer but a finding naming it.
func TestDeletingUnpredictable(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{
			name: "time.now",
			spec: configMapRules + `
  conditions:
  - name: old
    expression: time.now() - timestamp(object.metadata.creationTimestamp) > duration("24h")
`,
			want: `Kyverno DeletingPolicy cleanup: condition "old" uses time.now(), which Kyverno reads from the wall clock, not the simulation's: which objects it deletes depends on when it runs`,
		},
		{
			name: "time.now with spaces, in a variable",
			spec: configMapRules + `
  variables:
  - name: age
    expression: time . now () - timestamp(object.metadata.creationTimestamp)
  conditions:
  - name: old
    expression: variables.age > duration("24h")
`,
			want: `Kyverno DeletingPolicy cleanup: variable "age" uses time.now(), which Kyverno reads from the wall clock, not the simulation's: which objects it deletes depends on when it runs`,
		},
		{
			name: "http",
			spec: configMapRules + `
  variables:
  - name: allowed
    expression: http.Get("https://inventory.example.com/allowed")
`,
			want: `Kyverno DeletingPolicy cleanup: variable "allowed" uses http, which reaches outside the cluster`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, bg := generateEnv(t, deletingPolicy("DeletingPolicy", "", tc.spec))
			if ws := bg.Writers(); len(ws) != 0 {
				t.Errorf("%d writers, want none", len(ws))
			}
			if u := bg.Unpredictable(); len(u) != 1 || u[0] != tc.want {
				t.Errorf("unpredictable %q\nwant %q", u, tc.want)
			}
		})
	}
	t.Run("schedule", func(t *testing.T) {
		policy := strings.Replace(deletingPolicy("DeletingPolicy", "", configMapRules), `"*/10 * * * *"`, `"every ten minutes"`, 1)
		_, _, bg := generateEnv(t, policy)
		if ws := bg.Writers(); len(ws) != 0 {
			t.Errorf("%d writers, want none", len(ws))
		}
		if u := bg.Unpredictable(); len(u) != 1 || !strings.HasPrefix(u[0], `Kyverno DeletingPolicy cleanup: schedule "every ten minutes": `) {
			t.Errorf("unpredictable %q", u)
		}
	})
}
