package configuration

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// request is one point of the space rules match.
type request struct{ op, group, version, resource, scope string }

// matches is the API server's rule matching (webhook rules/matcher.go),
// written independently of the code under test.
func (r rule) matches(q request) bool {
	in := func(xs []string, x string) bool { return slices.Contains(xs, x) || slices.Contains(xs, "*") }
	if !in(r.operations, q.op) || !in(r.apiGroups, q.group) || !in(r.apiVersions, q.version) {
		return false
	}
	if r.scope != "*" && r.scope != q.scope {
		return false
	}
	res, sub, hasSub := strings.Cut(q.resource, "/")
	for _, x := range r.resources {
		switch {
		case x == "*/*", x == q.resource:
			return true
		case !hasSub && x == "*":
			return true
		case hasSub && (x == res+"/*" || x == "*/"+sub):
			return true
		}
	}
	return false
}

// TestMergeRulesExact: merged rules match exactly the requests the rules
// they came from match, on random sets of rules over a small universe.
func TestMergeRulesExact(t *testing.T) {
	ops := []string{"CREATE", "UPDATE", "DELETE", "*"}
	groups := []string{"", "apps", "coordination.k8s.io", "*"}
	versions := []string{"v1", "v1beta1", "*"}
	resources := []string{"pods", "pods/status", "pods/*", "deployments", "deployments/scale", "leases", "*", "*/status", "*/scale", "*/*"}
	scopes := []string{"Namespaced", "Cluster", "*"}
	var universe []request
	for _, op := range ops[:3] {
		for _, g := range groups[:3] {
			for _, v := range versions[:2] {
				for _, res := range []string{"pods", "pods/status", "pods/log", "deployments", "deployments/scale", "deployments/status", "leases"} {
					for _, s := range scopes[:2] {
						universe = append(universe, request{op, g, v, res, s})
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []string) []string {
		n := 1 + rng.IntN(3)
		out := make([]string, 0, n)
		for range n {
			out = append(out, xs[rng.IntN(len(xs))])
		}
		return out
	}
	for i := range 500 {
		var in []rule
		for range 1 + rng.IntN(6) {
			in = append(in, rule{
				operations: normalize(pick(ops)), apiGroups: normalize(pick(groups)),
				apiVersions: normalize(pick(versions)), resources: normalizeResources(pick(resources)),
				scope: scopes[rng.IntN(len(scopes))],
			})
		}
		out := mergeRules(in)
		if len(out) > len(in) {
			t.Errorf("case %d: %d rules from %d", i, len(out), len(in))
		}
		for _, q := range universe {
			want := slices.ContainsFunc(in, func(r rule) bool { return r.matches(q) })
			got := slices.ContainsFunc(out, func(r rule) bool { return r.matches(q) })
			if got != want {
				t.Fatalf("case %d: %+v matched %v, want %v\nin:  %+v\nout: %+v", i, q, got, want, in, out)
			}
		}
	}
}

func TestNormalizeResources(t *testing.T) {
	for _, tt := range []struct {
		in, want []string
	}{
		{[]string{"pods", "configmaps", "pods"}, []string{"configmaps", "pods"}},
		{[]string{"pods", "*"}, []string{"*"}},
		{[]string{"pods/status", "*"}, []string{"*", "pods/status"}},
		{[]string{"pods/status", "pods/*"}, []string{"pods/*"}},
		{[]string{"pods/status", "*/status", "deployments/status"}, []string{"*/status"}},
		{[]string{"pods", "*/*", "*"}, []string{"*/*"}},
		{[]string{"pods/*", "*/status"}, []string{"*/status", "pods/*"}},
	} {
		if got := normalizeResources(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("normalizeResources(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
