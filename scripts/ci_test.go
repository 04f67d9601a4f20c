// Package scripts tests the CI integrations as their CI runs them: the
// GitHub Action's script (action.yml) with the environment GitHub passes,
// and the pre-commit hooks' commands (.pre-commit-hooks.yaml).
package scripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// truce is the binary under test, built once by TestMain.
var truce string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "truce-ci-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	truce = filepath.Join(dir, "truce")
	build := exec.Command("go", "build", "-o", truce, "./cmd/truce")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building truce: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestVersion reads the versions truce reproduces from the binary's build
// information, as a user's binary has it.
func TestVersion(t *testing.T) {
	out, err := exec.Command(truce, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Reproduces []struct{ Name, Version, Source string }
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]string{}
	for _, c := range info.Reproduces {
		got[c.Name] = c.Version
	}
	for name, prefix := range map[string]string{
		"Kubernetes": "v1.", "Argo CD": "v3.", "Flux kustomize-controller": "v1.", "Flux helm-controller": "v1.",
		"Flux kustomize library": "v1.", "Helm": "v4.", "kustomize": "v0.",
	} {
		if !strings.HasPrefix(got[name], prefix) {
			t.Errorf("%s = %q, want %s…", name, got[name], prefix)
		}
	}
}

// TestAction runs scripts/action.sh from the repository's root, as
// action.yml does on a runner, and reads what GitHub would show.
func TestAction(t *testing.T) {
	for _, tool := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (GitHub's runners have it)", tool)
		}
	}
	tests := []struct {
		name     string
		inputs   map[string]string
		wantCode int
		// wantSummary are lines of the job summary.
		wantSummary []string
		wantResults []string // SARIF rule ids
		wantReport  string   // a line of the second format's file
	}{
		{
			name:     "a loop and a rejection fail the job",
			inputs:   map[string]string{"INPUT_PATHS": "examples/image-mirror", "INPUT_FORMAT": "junit"},
			wantCode: 1,
			wantSummary: []string{
				"| Tool | Unit | Objects | Loop | OutOfSync | Rejected | Pruned | Unpredictable | Synced |",
				"| argocd | shop | 1 | 1 | 0 | 0 | 0 | 0 | 0 |",
				"| argocd | batch | 1 | 0 | 0 | 1 | 0 | 0 | 0 |",
			},
			wantResults: []string{"truce/loop", "truce/rejected"},
			wantReport:  `<testsuites name="truce check examples/image-mirror"`,
		},
		{
			name:     "settled with -c and extra flags",
			inputs:   map[string]string{"INPUT_PATHS": "examples/label-mutation/app.yaml", "INPUT_CLUSTER": "examples/label-mutation/policy.yaml", "INPUT_ARGS": "--offline --window 30m"},
			wantCode: 0,
			wantSummary: []string{
				"| argocd | (defaults) | 2 | 0 | 0 | 0 | 0 | 0 | 2 |",
				"| flux | (defaults) | 2 | 0 | 0 | 0 | 0 | 0 | 2 |",
				"Every object settles.",
			},
		},
		{
			// Without a binary the action builds truce from its source,
			// and the Kyverno helper beside it for a repository with
			// Kyverno policies (else truce could not run them).
			name:     "built from source with the Kyverno helper",
			inputs:   map[string]string{"INPUT_TRUCE": "", "INPUT_PATHS": "examples/kyverno-generate"},
			wantCode: 1,
			wantSummary: []string{
				"| argocd | shop | 6 | 1 | 0 | 0 | 1 | 0 | 4 |",
			},
			wantResults: []string{"truce/loop", "truce/pruned", "truce/setting"},
		},
		{
			name:        "an error is exit 2, said in the summary",
			inputs:      map[string]string{"INPUT_PATHS": "examples/no-such-example"},
			wantCode:    2,
			wantSummary: []string{"truce could not check `examples/no-such-example` (exit 2):", "no such file or directory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			summary, output := filepath.Join(tmp, "summary.md"), filepath.Join(tmp, "output")
			sarif, report := filepath.Join(tmp, "truce.sarif"), filepath.Join(tmp, "report")
			cmd := exec.Command("bash", "scripts/action.sh")
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(),
				"GITHUB_ACTIONS=true", "GITHUB_WORKSPACE="+cmd.Dir, "RUNNER_TEMP="+tmp,
				"GITHUB_STEP_SUMMARY="+summary, "GITHUB_OUTPUT="+output,
				"INPUT_TRUCE="+truce, "INPUT_SARIF="+sarif, "INPUT_REPORT="+report,
			)
			for k, v := range tt.inputs {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}

			outputs := readFile(t, output)
			if !strings.Contains(outputs, fmt.Sprintf("exit-code=%d\n", tt.wantCode)) {
				t.Errorf("GITHUB_OUTPUT lacks exit-code=%d:\n%s", tt.wantCode, outputs)
			}
			sum := readFile(t, summary)
			for _, want := range tt.wantSummary {
				if !strings.Contains(sum, want) {
					t.Errorf("summary lacks %q:\n%s", want, sum)
				}
			}
			if tt.wantCode == 2 {
				return
			}
			if !strings.Contains(outputs, "sarif="+sarif+"\n") {
				t.Errorf("GITHUB_OUTPUT lacks sarif=%s:\n%s", sarif, outputs)
			}
			var log struct {
				Version string `json:"version"`
				Runs    []struct {
					Results []struct {
						RuleID string `json:"ruleId"`
					} `json:"results"`
				} `json:"runs"`
			}
			if err := json.Unmarshal([]byte(readFile(t, sarif)), &log); err != nil {
				t.Fatalf("SARIF: %v", err)
			}
			var rules []string
			for _, r := range log.Runs {
				for _, res := range r.Results {
					rules = append(rules, res.RuleID)
				}
			}
			slices.Sort(rules)
			if log.Version != "2.1.0" || !slices.Equal(rules, tt.wantResults) {
				t.Errorf("SARIF %s with results %v, want 2.1.0 with %v", log.Version, rules, tt.wantResults)
			}
			if tt.wantReport != "" && !strings.Contains(readFile(t, report), tt.wantReport) {
				t.Errorf("report lacks %q", tt.wantReport)
			}
		})
	}
}

// TestPreCommitHooks runs each hook's entry as pre-commit does: the entry,
// split on spaces, then the hook's args, then the staged files its files
// pattern selects.
func TestPreCommitHooks(t *testing.T) {
	var hooks []struct {
		ID            string `json:"id"`
		Name          string `json:"name"`
		Description   string `json:"description"`
		Entry         string `json:"entry"`
		Language      string `json:"language"`
		Files         string `json:"files"`
		RequireSerial bool   `json:"require_serial"`
	}
	if err := yaml.UnmarshalStrict([]byte(readFile(t, "../.pre-commit-hooks.yaml")), &hooks); err != nil {
		// UnmarshalStrict refuses fields the struct lacks: keep the
		// struct in step with the file.
		t.Fatal(err)
	}
	byID := map[string]int{}
	for i, h := range hooks {
		byID[h.ID] = i
	}
	tests := []struct {
		hook     string
		args     []string
		staged   []string
		wantCode int
	}{
		{hook: "truce-lint", staged: []string{"lint/testdata/webhook-matches-leases/bad.yaml", "README.md"}, wantCode: 1},
		{hook: "truce-lint", staged: []string{"lint/testdata/webhook-matches-leases/good.yaml"}, wantCode: 0},
		{hook: "truce-check", staged: []string{"examples/image-mirror/app/web.yaml", "examples/image-mirror/cluster/image-mirror.yaml", "examples/image-mirror/cluster/namespace.yaml"}, wantCode: 1},
		{hook: "truce-check", args: []string{"-c", "examples/label-mutation/policy.yaml"}, staged: []string{"examples/label-mutation/app.yaml", "examples/label-mutation/README.md"}, wantCode: 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.hook, tt.staged), func(t *testing.T) {
			i, ok := byID[tt.hook]
			if !ok {
				t.Fatalf("no hook %s", tt.hook)
			}
			h := hooks[i]
			if h.Language != "golang" || !h.RequireSerial {
				t.Errorf("%s: language %s, require_serial %v: want golang, all files in one run", h.ID, h.Language, h.RequireSerial)
			}
			files := regexp.MustCompile(h.Files)
			argv := append(strings.Fields(h.Entry), tt.args...)
			for _, f := range tt.staged {
				if files.MatchString(f) {
					argv = append(argv, f)
				}
			}
			if argv[0] != "truce" {
				t.Fatalf("entry %q does not run truce", h.Entry)
			}
			cmd := exec.Command(truce, argv[1:]...)
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("%v: exit %d, want %d:\n%s", argv, code, tt.wantCode, out)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
