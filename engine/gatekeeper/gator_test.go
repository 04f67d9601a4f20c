package gatekeeper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/gatekeeper"
)

// update rewrites the recorded answers of gator (TRUCE_GATOR names the
// binary, built from github.com/open-policy-agent/gatekeeper/v3/cmd/gator
// at the version go.mod pins; hack/gator.sh builds it).
var update = flag.Bool("update", false, "record gator's answers in testdata/gator/*.gator.json")

// gatorResult is the part of `gator test -o json` the webhook's answer is
// made of.
type gatorResult struct {
	Msg        string `json:"msg"`
	Constraint struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"constraint"`
	EnforcementAction string `json:"enforcementAction"`
	ViolatingObject   struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"violatingObject"`
}

// verdicts maps "Kind/name" to the webhook's lines for it: "deny [name]
// msg" and "warn [name] msg".
type verdicts map[string][]string

// TestGator compares truce's chain with `gator test` on Gatekeeper's own
// gator fixtures: every object of a case is written through the chain
// with the case's templates and constraints in the cluster. Its denials
// and warnings must be what gator reports (recorded in *.gator.json, or
// asked of TRUCE_GATOR), and in any case what Gatekeeper's own test.bats
// asserts of gator: whether it exits 1 (a deny violation) and messages.
func TestGator(t *testing.T) {
	gator := os.Getenv("TRUCE_GATOR")
	if *update && gator == "" {
		t.Fatal("-update needs TRUCE_GATOR")
	}
	tests := []struct {
		name  string
		files []string
		// deny and msgs are test.bats's assertions: gator exits 1, and
		// these messages are among the denials.
		deny bool
		msgs []string
	}{
		{"with-violations", []string{"with-policies/with-violations.yaml"}, true,
			[]string{"Container <tomcat> in your <Pod> <test-pod1> has no <readinessProbe>"}},
		{"with-violations-rego-v1", []string{"with-policies/with-violations-rego-v1.yaml"}, true, nil},
		{"with-violations-and-defaults", []string{"with-policies/with-violations-and-defaults.yaml"}, true,
			[]string{"aRequiredMessage"}},
		{"no-violations", []string{"with-policies/no-violations.yaml"}, false, nil},
		{"policies+with-violations", []string{"policies", "no-policies/with-violations.yaml"}, true,
			[]string{"Container <tomcat> in your <Pod> <test-pod1> has no <readinessProbe>"}},
		{"policies+no-violations", []string{"policies", "no-policies/no-violations.yaml"}, false, nil},
		// Gatekeeper's e2e test of expansion (test.bats "gatekeeper
		// expansion test", its test/expansion files), step by step.
		{"expansion-deployment-no-label", expansionCase("expand_deployments", "loadbalancers_must_have_env", "deployment_no_label"), true,
			[]string{`[Implied by expand-deployments] you must provide labels: {"env"}`}},
		{"expansion-deployment-with-label", expansionCase("expand_deployments", "loadbalancers_must_have_env", "deployment_with_label"), false, nil},
		{"expansion-assignmetadata-generated", expansionCase("expand_deployments", "loadbalancers_must_have_env", "assignmeta_env", "deployment_no_label"), false, nil},
		{"expansion-warn", expansionCase("warn_expand_deployments", "loadbalancers_must_have_env", "deployment_no_label"), false, nil},
		{"expansion-constraint-source-generated", expansionCase("expand_deployments", "loadbalancers_must_have_env_source_gen", "deployment_no_label"), true,
			[]string{`[Implied by expand-deployments] you must provide labels: {"env"}`}},
		{"expansion-cronjob-job-pod", expansionCase("expand_cronjob_job_pod", "loadbalancers_must_have_env", "cronjob"), true,
			[]string{`[Implied by expand-jobs] you must provide labels: {"env"}`}},
		{"expansion-none", expansionCase("loadbalancers_must_have_env", "deployment_no_label"), false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var files []string
			for _, p := range tc.files {
				files = append(files, filepath.Join("testdata", "gator", p))
			}
			got := runTruce(t, files, strings.HasPrefix(tc.name, "expansion"))
			denied := false
			var lines []string
			for _, ls := range got {
				for _, l := range ls {
					denied = denied || strings.HasPrefix(l, "deny ")
					lines = append(lines, l)
				}
			}
			if denied != tc.deny {
				t.Errorf("denied = %v, want %v as gator exits (test.bats): %v", denied, tc.deny, got)
			}
			for _, m := range tc.msgs {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "deny ") && strings.Contains(l, m) }) {
					t.Errorf("no denial says %q (test.bats): %v", m, got)
				}
			}

			golden := filepath.Join("testdata", "gator", tc.name+".gator.json")
			var want verdicts
			switch {
			case gator != "":
				want = runGator(t, gator, files)
				if *update {
					b, err := json.MarshalIndent(want, "", "  ")
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			default:
				raw, err := os.ReadFile(golden)
				if errors.Is(err, fs.ErrNotExist) {
					return // not recorded yet: test.bats's assertions only
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(raw, &want); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("truce differs from gator test (-gator +truce):\n%s", diff)
			}
		})
	}
}

// expansionCase is the files of test.bats's expansion test named, after
// the ConstraintTemplate and the namespace the test creates.
func expansionCase(names ...string) []string {
	files := []string{"expansion-namespace.yaml", "expansion/k8srequiredlabels_ct.yaml"}
	for _, n := range names {
		files = append(files, "expansion/"+n+".yaml")
	}
	return files
}

func readFiles(t *testing.T, files []string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range files {
		var paths []string
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			entries, err := os.ReadDir(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				paths = append(paths, filepath.Join(f, e.Name()))
			}
		} else {
			paths = append(paths, f)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, objects(t, strings.TrimPrefix(string(b), "---\n"))...)
		}
	}
	return out
}

// runTruce writes the cases' other objects through a chain whose cluster
// holds its Gatekeeper objects, and its Namespaces when nsInCluster (the
// expansion cases: test.bats creates the namespace first, and gator reads a
// Namespace as the namespace of the objects in it; the other fixtures
// review Namespaces as objects).
func runTruce(t *testing.T, files []string, nsInCluster bool) verdicts {
	t.Helper()
	var cluster, writes []*unstructured.Unstructured
	for _, o := range readFiles(t, files) {
		if gatekeeper.Reads(o.GroupVersionKind().Group) || nsInCluster && o.GetAPIVersion() == "v1" && o.GetKind() == "Namespace" {
			cluster = append(cluster, o)
		} else {
			writes = append(writes, o)
		}
	}
	state, err := admission.NewState(cluster...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{Engines: []admission.PolicyEngine{testEngine}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	out := verdicts{}
	const prefix = `admission webhook "validation.gatekeeper.sh" denied the request: `
	for _, w := range writes {
		res, err := chain.Admit(context.Background(), admission.Request{Object: w})
		if err != nil {
			t.Fatalf("%s %s: %v", w.GetKind(), w.GetName(), err)
		}
		key := w.GetKind() + "/" + w.GetName()
		if !res.Allowed {
			if !strings.HasPrefix(res.Message, prefix) {
				t.Fatalf("%s denied by something else: %s", key, res.Message)
			}
			for _, line := range strings.Split(strings.TrimPrefix(res.Message, prefix), "\n") {
				out[key] = append(out[key], "deny "+line)
			}
		}
		for _, warn := range res.Warnings {
			out[key] = append(out[key], "warn "+warn)
		}
		sort.Strings(out[key])
	}
	return out
}

// runGator asks gator test the same; its deny and warn results are the
// webhook's lines, dryrun results none.
func runGator(t *testing.T, gator string, files []string) verdicts {
	t.Helper()
	args := []string{"test", "-o", "json"}
	for _, f := range files {
		args = append(args, "--filename="+f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gator, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// gator exits 1 when it finds violations.
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("gator %v: %v\n%s", args, err, stderr.String())
	}
	var results []gatorResult
	if s := strings.TrimSpace(stdout.String()); s != "" && s != "null" {
		if err := json.Unmarshal(stdout.Bytes(), &results); err != nil {
			t.Fatalf("gator output: %v\n%s", err, stdout.String())
		}
	}
	out := verdicts{}
	for _, r := range results {
		if r.EnforcementAction != "deny" && r.EnforcementAction != "warn" {
			continue
		}
		key := r.ViolatingObject.Kind + "/" + r.ViolatingObject.Metadata.Name
		out[key] = append(out[key], r.EnforcementAction+" ["+r.Constraint.Metadata.Name+"] "+r.Msg)
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}
