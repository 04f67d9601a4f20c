package simulate

import (
	"context"
	"strings"
	"testing"
	"time"
)

const settingsA = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: a}
`

const settingsB = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: b}
`

const other = `apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: shop}
data: {k: v}
`

// Units of one entry point share a cluster: two units that apply the same
// object with different values fight over it, each seeing the other as
// another writer; units that share nothing settle as they do alone.
func TestRunWorld(t *testing.T) {
	argo := func(app string) func(d []Desired) Tool {
		return func(d []Desired) Tool {
			return &ArgoCD{App: app, Automated: true, SelfHeal: true, Desired: d, Backoff: DefaultBackoff()}
		}
	}
	flux := func(name string) func(d []Desired) Tool {
		return func(d []Desired) Tool { return &Flux{Kustomization: name, Namespace: "flux-system", Desired: d} }
	}
	type member struct {
		label string
		tool  func(d []Desired) Tool
		git   string
	}
	cases := []struct {
		name    string
		members []member
		writers []Writer
		// want is the verdict of each member's first object; other the
		// writer a loop names.
		want  []Verdict
		other []string
	}{
		{
			name:    "two Applications apply one object with different values",
			members: []member{{"Application a", argo("a"), settingsA}, {"Application b", argo("b"), settingsB}},
			want:    []Verdict{Loop, Loop},
			other:   []string{"(Application b)", "(Application a)"},
		},
		{
			name:    "two Kustomizations apply one object with different values",
			members: []member{{"Kustomization a", flux("a"), settingsA}, {"Kustomization b", flux("b"), settingsB}},
			want:    []Verdict{Loop, Loop},
			other:   []string{"(Kustomization b)", "(Kustomization a)"},
		},
		{
			name:    "units that share nothing settle",
			members: []member{{"Application a", argo("a"), settingsA}, {"Kustomization b", flux("b"), other}},
			want:    []Verdict{Synced, Synced},
		},
		{
			// The quiet rounds of a Kustomization every minute must not
			// end the run before another's 10-minute reconciliation
			// corrects what the autoscaler changed.
			name: "a quiet member does not hide another's later correction",
			members: []member{{"Kustomization a", func(d []Desired) Tool {
				return &Flux{Kustomization: "a", Namespace: "flux-system", Interval: time.Minute, Desired: d}
			}, other}, {"Kustomization b", flux("b"), web}},
			writers: []Writer{testHPA()},
			want:    []Verdict{Synced, Loop},
			other:   []string{"", "kube-controller-manager"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, shop)
			var members []Member
			for _, m := range tc.members {
				d := desiredOf(t, m.git)
				members = append(members, Member{Tool: m.tool(d), Desired: d, Label: m.label})
			}
			results, err := RunWorld(context.Background(), c, members, tc.writers, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, res := range results {
				o := res.Objects[0]
				if o.Verdict != tc.want[i] {
					t.Fatalf("%s: %s %s (%s), want %s", tc.members[i].label, o.Ref, o.Verdict, o.Reason, tc.want[i])
				}
				if o.Verdict == Loop && !strings.Contains(o.Loop.Other, tc.other[i]) {
					t.Errorf("%s: loop with %q, want %q", tc.members[i].label, o.Loop.Other, tc.other[i])
				}
				for _, w := range res.Writes {
					if w.Ref != o.Ref {
						t.Errorf("%s: result carries a write to %s, not its own", tc.members[i].label, w.Ref)
					}
				}
			}
		})
	}
}

// A run of one member is the run of one tool.
func TestRunIsAWorldOfOne(t *testing.T) {
	run := func(world bool) *Result {
		c := newCluster(t, shop+"---\n"+mirrorPolicy)
		d := desiredOf(t, web)
		tool := &ArgoCD{App: "shop", Automated: true, SelfHeal: true, Desired: d}
		if !world {
			res, err := Run(context.Background(), c, tool, nil, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		res, err := RunWorld(context.Background(), c, []Member{{Tool: tool, Desired: d, Label: "Application shop"}}, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	a, b := run(false), run(true)
	if len(a.Writes) != len(b.Writes) || a.Objects[0].Verdict != b.Objects[0].Verdict || a.Objects[0].Loop.Period != b.Objects[0].Loop.Period {
		t.Errorf("alone: %d writes, %s; world of one: %d writes, %s", len(a.Writes), a.Objects[0].Verdict, len(b.Writes), b.Objects[0].Verdict)
	}
	if a.Objects[0].Loop.Period != 300*time.Second {
		t.Errorf("period %s", a.Objects[0].Loop.Period)
	}
}
