package check

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/world"
	"github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

// uids masks what each simulation makes up afresh (uids, times).
var uids = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// TestWorkersAgree: verifying the fixes of several problems at a time
// gives the outcome of verifying them one after another — the report, and
// every candidate's verdict and files — on repositories whose fixes edit
// plain manifests, Helm values and kustomizations.
func TestWorkersAgree(t *testing.T) {
	ctx := context.Background()
	plain := func(t *testing.T) (Request, string) {
		dir := filepath.Join("..", "examples", "image-mirror")
		objs, err := manifest.LoadPaths(ctx, []string{dir}, manifest.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		src := Sources{Repository: []string{dir}}
		return Request{Input: Input{Repository: objs}, Sources: src, Verify: true}, dir
	}
	helm := func(t *testing.T) (Request, string) {
		root := t.TempDir()
		if err := copyTree(filepath.Join("testdata", "helm-mirror"), root); err != nil {
			t.Fatal(err)
		}
		opts := offlineOptions(t, root, "https://git.example.com/platform.git")
		cluster := []string{filepath.Join(root, "cluster")}
		// One directory with two Applications: a Helm chart's and a
		// kustomization's.
		apps := []string{filepath.Join(root, "apps")}
		web, err := os.ReadFile(filepath.Join(root, "apps-kustomize", "web.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "apps", "web.yaml"), web, 0o644); err != nil {
			t.Fatal(err)
		}
		cl, err := manifest.LoadPaths(ctx, cluster, manifest.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		ws, err := world.Load(ctx, apps, opts)
		if err != nil {
			t.Fatal(err)
		}
		src := Sources{Repository: apps, Cluster: cluster}
		return Request{Input: WorldInput(ws[0], cl), Sources: src, Verify: true, Load: WorldLoader(testWorkspace(t), apps, 0, opts, src, cl)}, root
	}
	for _, tc := range []struct {
		name string
		req  func(*testing.T) (Request, string)
	}{{"plain manifests", plain}, {"helm and kustomize", helm}} {
		t.Run(tc.name, func(t *testing.T) {
			var outs [2]string
			problems := 0
			for i, workers := range []int{1, 4} {
				req, root := tc.req(t)
				req.Options.Workers = workers
				got, err := Run(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				problems = len(got.Problems)
				// Each object's fixes are its own.
				var reported []string
				for _, run := range got.Report.Runs {
					for _, o := range run.Objects {
						if simulate.Verdict(o.Verdict).Problem() {
							reported = append(reported, o.Object)
						}
					}
				}
				var fixed []string
				for _, p := range got.Problems {
					fixed = append(fixed, p.Ref.String())
				}
				if !slices.Equal(reported, fixed) {
					t.Fatalf("%d workers: problems %v, fixes of %v", workers, reported, fixed)
				}
				outs[i] = strings.ReplaceAll(outcomeText(t, got), root, "ROOT")
			}
			if problems < 2 {
				t.Fatalf("%d problems: too few to verify at a time", problems)
			}
			if outs[0] != outs[1] {
				t.Errorf("one worker:\n%s\nfour workers:\n%s", outs[0], outs[1])
			}
		})
	}
}

// outcomeText is what an outcome says, made-up values masked.
func outcomeText(t *testing.T, o *Outcome) string {
	t.Helper()
	type cand struct {
		Kind, Verdict string
		Files         map[string]string
	}
	var fixes [][]cand
	for _, p := range o.Problems {
		var cs []cand
		for i, c := range p.Candidates {
			files := map[string]string{}
			for _, f := range c.Paths() {
				b := c.Content(f)
				files[filepath.Base(f)] = string(b)
			}
			cs = append(cs, cand{string(c.Kind), string(p.Verdicts[i]), files})
		}
		fixes = append(fixes, cs)
	}
	b, err := json.MarshalIndent(struct {
		Report any
		Fixes  any
	}{o.Report, fixes}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return uids.ReplaceAllString(string(b), "X")
}

// TestSimulateAllWorkersAgree: simulating independent groups of setups at
// a time (each on its own cluster) gives every setup the result it gets
// when they run one after another.
func TestSimulateAllWorkersAgree(t *testing.T) {
	ctx := context.Background()
	concurrent := 0
	for name, dir := range realisticRepositories(t) {
		t.Run(name, func(t *testing.T) {
			in, opts := loadRealistic(t, dir)
			var outs [2][]string
			for i, workers := range []int{1, 4} {
				r, setups := prepared(t, in, opts)
				if i == 0 && (!r.Together() && len(setups) > 1 || r.Together() && len(r.byCluster(setups)) > 1) {
					concurrent++
				}
				o := opts
				o.Workers = workers
				results, err := r.simulateAll(ctx, setups, o)
				if err != nil {
					t.Fatal(err)
				}
				for j, res := range results {
					text, err := json.Marshal(struct {
						Tool, Unit, Settings string
						Objects              []report.Object
					}{res.Tool, res.Unit, res.Settings, reportObjects(res)})
					if err != nil {
						t.Fatal(err)
					}
					outs[i] = append(outs[i], fmt.Sprintf("%d %s", j, uids.ReplaceAll(text, []byte("UID"))))
				}
			}
			if !slices.Equal(outs[0], outs[1]) {
				t.Errorf("one at a time:\n%s\nfour at a time:\n%s", strings.Join(outs[0], "\n"), strings.Join(outs[1], "\n"))
			}
		})
	}
	if concurrent == 0 {
		t.Error("no repository has independent groups to simulate at a time")
	}
}

func reportObjects(res *simulate.Result) []report.Object {
	var out []report.Object
	for _, o := range res.Objects {
		out = append(out, reportObject(o, res))
	}
	return out
}
