package lint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// loadExample loads testdata/<rule>/<file>.
func loadExample(t *testing.T, rule, file string) *Input {
	t.Helper()
	objs, err := manifest.LoadPaths(context.Background(), []string{filepath.Join("testdata", rule, file)}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return &Input{Objects: objs}
}

func findingsOf(fs []Finding, rule string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

// ownRules are the rules of this package's own files, whose good examples
// must be clean of every one of them (not only of their own rule).
func ownRules() map[string]bool {
	out := map[string]bool{}
	for _, list := range [][]Rule{webhookRules(), policyRules(), argoRules()} {
		for _, r := range list {
			out[r.ID] = true
		}
	}
	return out
}

// TestExamples: the documented examples are the rules' tests. For every
// rule, bad.yaml gives at least one finding of the rule and good.yaml none.
func TestExamples(t *testing.T) {
	own := ownRules()
	for _, r := range Rules() {
		t.Run(r.ID, func(t *testing.T) {
			bad, err := Run(context.Background(), loadExample(t, r.ID, "bad.yaml"), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := findingsOf(bad, r.ID)
			if len(got) == 0 {
				t.Errorf("bad.yaml: no %s finding; all findings: %+v", r.ID, bad)
			}
			for _, f := range got {
				if f.Severity.Rank() > r.Severity.Rank() {
					t.Errorf("finding severity %s above the rule's %s", f.Severity, r.Severity)
				}
				if f.Message == "" || f.Why == "" || f.Fix == "" || f.Object == "" {
					t.Errorf("incomplete finding: %+v", f)
				}
				if !strings.HasPrefix(f.Source, filepath.Join("testdata", r.ID, "bad.yaml")+":") {
					t.Errorf("source %q does not name bad.yaml and a line", f.Source)
				}
			}
			good, err := Run(context.Background(), loadExample(t, r.ID, "good.yaml"), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range good {
				if f.Rule == r.ID || (own[r.ID] && own[f.Rule]) {
					t.Errorf("good.yaml: %s: %s %s: %s", f.Source, f.Severity, f.Rule, f.Message)
				}
			}
		})
	}
}

// TestDocs: docs/lint.md names every rule and holds every example
// verbatim, so that the documentation is what is tested.
func TestDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "lint.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, r := range Rules() {
		if !strings.Contains(doc, "### `"+r.ID+"`") {
			t.Errorf("docs/lint.md has no section \"### `%s`\"", r.ID)
		}
		for _, file := range []string{"bad.yaml", "good.yaml"} {
			ex, err := os.ReadFile(filepath.Join("testdata", r.ID, file))
			if err != nil {
				t.Errorf("%s: %v", r.ID, err)
				continue
			}
			if !strings.Contains(doc, string(ex)) {
				t.Errorf("docs/lint.md does not contain testdata/%s/%s verbatim", r.ID, file)
			}
		}
	}
}

// TestEveryRuleHasExamples: every rule has a testdata directory with both
// examples, and every testdata directory belongs to a rule.
func TestEveryRuleHasExamples(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range Rules() {
		if ids[r.ID] {
			t.Errorf("duplicate rule id %s", r.ID)
		}
		ids[r.ID] = true
		for _, file := range []string{"bad.yaml", "good.yaml"} {
			if _, err := os.Stat(filepath.Join("testdata", r.ID, file)); err != nil {
				t.Errorf("rule %s: %v", r.ID, err)
			}
		}
		if r.Summary == "" || r.Check == nil || r.Severity.Rank() == 0 {
			t.Errorf("rule %s is incomplete: %+v", r.ID, r)
		}
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !ids[e.Name()] && e.Name() != "fuzz" {
			t.Errorf("testdata/%s belongs to no rule", e.Name())
		}
	}
}
