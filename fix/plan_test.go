package fix

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

// Two fixes of one file both land: the second is made over the first.
func TestPlanAppliesFixesOneOverTheOther(t *testing.T) {
	ks := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: web}\nspec:\n  interval: 10m\n"
	read := func(p string) ([]byte, error) {
		if p == "ks.yaml" {
			return []byte(ks), nil
		}
		return nil, errNotExist
	}
	problem := func(name, field string) Problem {
		ref := cluster.Ref{Namespace: "shop", Name: name}
		ref.Group, ref.Version, ref.Kind = "apps", "v1", "Deployment"
		o := &simulate.Object{Ref: ref, InGit: true, Verdict: simulate.Loop,
			Loop:  &simulate.LoopInfo{Fields: []string{field}, Other: "kube-controller-manager", OtherKind: "controller"},
			Drift: &drift.Object{}}
		return Problem{Tool: "flux", Object: o, Kustomization: &gitops.FluxKustomization{Name: "web", Source: manifest.Source{File: "ks.yaml", Line: 1}}}
	}
	pl := NewPlan(read)
	for _, p := range []Problem{problem("web", "/spec/replicas"), problem("api", "/spec/paused")} {
		if _, err := pl.Add(p, KindIgnoreRule); err != nil {
			t.Fatal(err)
		}
	}
	if got := pl.Paths(); len(got) != 1 || got[0] != "ks.yaml" {
		t.Fatalf("paths %v", got)
	}
	got := string(pl.Files["ks.yaml"])
	for _, want := range []string{"- /spec/replicas", "name: ^web$", "- /spec/paused", "name: ^api$"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing from\n%s", want, got)
		}
	}
	if string(pl.Before["ks.yaml"]) != ks {
		t.Errorf("before:\n%s", pl.Before["ks.yaml"])
	}
	if _, err := pl.Add(problem("db", "/spec/replicas"), KindGitValue); err == nil || !strings.Contains(err.Error(), "cannot be made over the earlier fixes") {
		t.Errorf("a fix that is not a candidate: %v", err)
	}
}

// The same object looping under Argo CD and Flux needs one removal: the
// second tool's give-to-controller fix is the first's, already in the
// plan.
func TestPlanGivesAFieldAwayOnce(t *testing.T) {
	read := func(p string) ([]byte, error) {
		if p == "deployment.yaml" {
			return []byte(scaled), nil
		}
		return nil, errNotExist
	}
	ref := cluster.Ref{Namespace: "default", Name: "podinfo"}
	ref.Group, ref.Version, ref.Kind = "apps", "v1", "Deployment"
	pl := NewPlan(read)
	for _, tool := range []string{"flux", "argocd"} {
		o := &simulate.Object{Ref: ref, InGit: true, Verdict: simulate.Loop,
			Loop: &simulate.LoopInfo{Fields: []string{"/spec/replicas"}, Other: "kube-controller-manager", OtherKind: "controller"}}
		if _, err := pl.Add(Problem{Tool: tool, Object: o, Source: manifest.Source{File: "deployment.yaml", Line: 1}}, KindGiveToController); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	if got, want := string(pl.Files["deployment.yaml"]), strings.Replace(scaled, "  replicas: 1 # one to start\n", "", 1); got != want {
		t.Errorf("deployment.yaml:\n%s\nwant:\n%s", got, want)
	}
}
