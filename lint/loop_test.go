package lint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
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
			in.options = testOptions()
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

// fakeSimulator answers with fixed verdicts.
type fakeSimulator struct {
	objs []Simulated
	err  error
}

func (f fakeSimulator) Simulate(context.Context, []manifest.Object, []manifest.Object) ([]Simulated, error) {
	return f.objs, f.err
}

// TestLoopRuleReportsTheSimulatorsLoops: a Loop verdict is a finding with
// the writers, fields, pace and the recommended fix; other verdicts are
// not; a simulation that fails, or no simulator, is one info finding.
func TestLoopRuleReportsTheSimulatorsLoops(t *testing.T) {
	loop := &simulate.LoopInfo{Fields: []string{"/spec/replicas"}, Tool: "argocd-controller", Other: "MutatingAdmissionPolicy/p (binding b)",
		OtherKind: "admission", Period: 5 * time.Minute, WritesPerHour: 24}
	for _, tc := range []struct {
		name      string
		sim       Simulator
		want      []string // substrings of the findings' Message and Fix, one finding each
		wantLevel Severity
	}{
		{name: "a loop", sim: fakeSimulator{objs: []Simulated{
			{Source: manifest.Source{File: "app/web.yaml", Line: 1}, Object: "Deployment.apps/shop/web", Verdict: simulate.Loop, Loop: loop, FixTitle: "Put the mutation in Git", FixDescription: "set it"},
			{Source: manifest.Source{File: "app/cm.yaml", Line: 1}, Object: "ConfigMap/shop/c", Verdict: simulate.OutOfSync},
		}}, want: []string{"MutatingAdmissionPolicy/p (binding b) (admission) and argocd-controller write /spec/replicas back and forth every 5m0s, 24 writes an hour" +
			"|Put the mutation in Git: set it (verify with `truce check`)"}, wantLevel: SeverityError},
		{name: "no fix", sim: fakeSimulator{objs: []Simulated{{Source: manifest.Source{File: "app/web.yaml", Line: 1}, Verdict: simulate.Loop, Loop: loop}}},
			want: []string{"back and forth|run `truce check` for the verified fix"}, wantLevel: SeverityError},
		{name: "the simulation fails", sim: fakeSimulator{err: errors.New("two Argo CD instances")},
			want: []string{"not simulated: two Argo CD instances|"}, wantLevel: SeverityInfo},
		{name: "no simulator", want: []string{"not simulated: no simulator|"}, wantLevel: SeverityInfo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := loadExample(t, RuleAdmissionGitOpsLoop, "bad.yaml")
			in.options = Options{Simulator: tc.sim}
			got, err := checkLoops(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				msg, fix, _ := strings.Cut(w, "|")
				if f := got[i]; !strings.Contains(f.Message, msg) || !strings.Contains(f.Fix, fix) || f.Severity != tc.wantLevel || f.Rule != RuleAdmissionGitOpsLoop {
					t.Errorf("finding %+v, want %s %q / %q", f, tc.wantLevel, msg, fix)
				}
			}
		})
	}
}
