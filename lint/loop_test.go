package lint

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// TestLoopRuleTakesTheLiveClusterAsState: with --kubeconfig, the live
// admission configuration is the cluster the files are applied to (a
// loop is found with the policy only in the cluster), and live objects of
// other kinds are not manifests to apply (no loop without files).
func TestLoopRuleTakesTheLiveClusterAsState(t *testing.T) {
	live := func(in *Input, kinds ...string) *Input {
		out := &Input{}
		for _, o := range in.Objects {
			for _, k := range kinds {
				if o.Object.GetKind() == k {
					o.Source = manifest.Source{File: LiveSource}
				}
			}
			out.Objects = append(out.Objects, o)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		live  []string
		loops int
	}{
		{name: "all in files", loops: 1},
		{name: "the policy in the cluster", live: []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}, loops: 1},
		{name: "the workload in the cluster too", live: []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "Deployment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := live(loadExample(t, RuleAdmissionGitOpsLoop, "bad.yaml"), tc.live...)
			got, err := checkLoops(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.loops {
				t.Fatalf("%d findings, want %d: %+v", len(got), tc.loops, got)
			}
			for _, f := range got {
				if !strings.HasPrefix(f.Source, "testdata/") {
					t.Errorf("finding at %q, want the file", f.Source)
				}
			}
		})
	}
}
