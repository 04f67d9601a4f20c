package kyverno_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno"
)

// chainsawTest is the part of a chainsaw Test that Kyverno's
// policy-validation suites use.
type chainsawTest struct {
	Spec struct {
		Steps []struct {
			Name string `json:"name"`
			Use  *struct {
				Template string `json:"template"`
				With     struct {
					Bindings []struct {
						Name  string `json:"name"`
						Value string `json:"value"`
					} `json:"bindings"`
				} `json:"with"`
			} `json:"use"`
			Try []struct {
				Apply *struct {
					File   string           `json:"file"`
					Expect []map[string]any `json:"expect"`
				} `json:"apply"`
				Script *struct {
					Content string         `json:"content"`
					Check   map[string]any `json:"check"`
				} `json:"script"`
			} `json:"try"`
		} `json:"steps"`
	} `json:"spec"`
}

// applyStep is one kubectl apply of a chainsaw test and what it expects.
type applyStep struct {
	file string
	// refused is whether the API server refuses the write; nil when the
	// test does not say (a script checking only what kubectl prints).
	refused *bool
	// has and hasNot are texts kubectl's output (the error and the
	// warnings) must or must not contain.
	has, hasNot []string
}

var (
	applyFile   = regexp.MustCompile(`kubectl apply -f (\S+)`)
	grepText    = regexp.MustCompile(`grep -q\s+"([^"]+)"`)
	containsErr = regexp.MustCompile(`^\(contains\(\$stderr, '((?:[^'\\]|\\.)*)'\)\)$`)
)

// readChainsaw turns a chainsaw test into its apply steps.
func readChainsaw(t *testing.T, path string) []applyStep {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ct chainsawTest
	if err := yaml.Unmarshal(data, &ct); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var steps []applyStep
	for _, s := range ct.Spec.Steps {
		if s.Use != nil {
			if strings.HasSuffix(s.Use.Template, "/create-policy.yaml") {
				for _, b := range s.Use.With.Bindings {
					if b.Name == "file" {
						admitted := false
						steps = append(steps, applyStep{file: b.Value, refused: &admitted})
					}
				}
			}
			continue // waiting for readiness
		}
		for _, op := range s.Try {
			switch {
			case op.Apply != nil:
				// chainsaw's apply fails on an error unless expected.
				refused := false
				for _, e := range op.Apply.Expect {
					if c, _ := e["check"].(map[string]any); c["($error != null)"] == true {
						refused = true
					}
				}
				st := applyStep{file: op.Apply.File, refused: &refused}
				steps = append(steps, st)
			case op.Script != nil:
				m := applyFile.FindStringSubmatch(op.Script.Content)
				if m == nil {
					t.Fatalf("%s: step %q: no kubectl apply in %q", path, s.Name, op.Script.Content)
				}
				st := applyStep{file: m[1]}
				if g := grepText.FindStringSubmatch(op.Script.Content); g != nil {
					// The shell unquotes \` inside double quotes.
					st.has = append(st.has, strings.ReplaceAll(g[1], "\\`", "`"))
				}
				for k, v := range op.Script.Check {
					if k == "($error != null)" {
						refused := v == true
						st.refused = &refused
						continue
					}
					c := containsErr.FindStringSubmatch(k)
					if c == nil {
						t.Fatalf("%s: step %q: check %q is not read here", path, s.Name, k)
					}
					text := strings.ReplaceAll(c[1], `\'`, `'`)
					if v == true {
						st.has = append(st.has, text)
					} else {
						st.hasNot = append(st.hasNot, text)
					}
				}
				steps = append(steps, st)
			}
		}
	}
	return steps
}

// notJudged are the policy-validation suites, or files of them, that this
// test does not run, with the reason.
var notJudged = map[string]string{
	"cluster-policy/policy-exceptions-disabled": "Kyverno runs with --enablePolicyException=false there; truce runs it with exceptions on",
	// The rest of these suites are resources admitted under the policy,
	// which the CLI corpus (cli_test.go) judges.
	"cluster-policy/crd-non-exist/crd.yaml":             "not a policy",
	"cluster-policy/crd-non-exist/deployment.yaml":      "not a policy",
	"cluster-policy/crd-non-exist/custom-resource.yaml": "not a policy",
}

// difference is a chainsaw expectation that Kyverno v1.19.1's webhook code
// does not meet: truce runs that code, so the test expects the code's
// answer (refused, and a text of it) instead, and says why.
type difference struct {
	refused bool
	has     string
	why     string
}

var differs = map[string]difference{
	"cluster-policy/cel-expressions/policy-3.yaml": {refused: true,
		has: "context variables are not supported for CEL expressions in validate rules",
		why: "the chainsaw check says kubectl does not print this, but validateRuleContext (pkg/validation/policy/validate.go:1289, kyverno/kyverno#13393) refuses a validate.cel rule with a context with exactly it, and the test's README says the policy is rejected"},
	"cluster-policy/background-subresource/policy-1.yaml": {refused: false,
		has: "unable to convert GVK to GVR for kinds Scale",
		why: "validKinds (pkg/validation/policy/validate.go:1582) finds no top-level kind Scale through discovery (a real API server lists Scale only as the scale subresource of Deployments, ReplicaSets, StatefulSets and ReplicationControllers) and answers a warning: a kind discovery does not know has been a warning since kyverno/kyverno#12722 (v1.14.0); the chainsaw test dates from when it was an error, and only Pod/*, */* and */status, which resolve to subresources, are still refused"},
	"cluster-policy/background-subresource/policy-2.yaml": {refused: false,
		has: "unable to convert GVK to GVR for kinds Pod/scale",
		why: "as policy-1.yaml: Pods have no scale subresource, and validKinds answers a warning"},
	"policy/background-subresource/policy-1.yaml": {refused: false,
		has: "unable to convert GVK to GVR for kinds Scale",
		why: "as cluster-policy/background-subresource/policy-1.yaml"},
	"policy/background-subresource/policy-2.yaml": {refused: false,
		has: "unable to convert GVK to GVR for kinds Pod/scale",
		why: "as cluster-policy/background-subresource/policy-2.yaml"},
}

// TestPolicyValidation writes the policies of Kyverno's own
// policy-validation conformance tests (testdata/policy-validation, and the
// cleanup policies' in testdata/cleanup) through
// a chain with Kyverno installed, as the chainsaw tests apply them to a
// cluster running Kyverno, and expects their answers: refused or not, and
// the texts kubectl prints. Kyverno's validate-policy.kyverno.svc webhook,
// its cleanup controller's webhook and the CRDs' schemas answer.
func TestPolicyValidation(t *testing.T) {
	var tests []string
	for _, root := range []struct {
		dir  string
		want int
	}{{"testdata/policy-validation", 21}, {"testdata/cleanup", 3}} {
		found, err := filepath.Glob(root.dir + "/*/*/chainsaw-test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != root.want {
			t.Fatalf("%d chainsaw tests in %s, want Kyverno's %d", len(found), root.dir, root.want)
		}
		tests = append(tests, found...)
	}
	eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
	t.Cleanup(eng.Close)
	judged := 0
	for _, path := range tests {
		dir := filepath.Dir(path)
		suite, _ := filepath.Rel("testdata", dir)
		suite = strings.TrimPrefix(filepath.ToSlash(suite), "policy-validation/")
		t.Run(suite, func(t *testing.T) {
			if why, ok := notJudged[suite]; ok {
				t.Skip(why)
			}
			state, err := admission.NewState(objs(t, namespaces)...)
			if err != nil {
				t.Fatal(err)
			}
			chain, err := admission.NewChain(testContext(t), state, admission.Options{Engines: []admission.PolicyEngine{eng}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { chain.Close() }()
			for _, st := range readChainsaw(t, path) {
				if _, ok := notJudged[suite+"/"+st.file]; ok {
					continue
				}
				data, err := os.ReadFile(filepath.Join(dir, st.file))
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range objs(t, string(data)) {
					if (o.GetKind() == "Policy" || o.GetKind() == "PolicyException") && o.GetNamespace() == "" {
						o.SetNamespace("apps") // chainsaw's namespace for the test
					}
					judged++
					res, err := chain.Admit(testContext(t), admission.Request{Source: st.file, Object: o})
					if err != nil {
						t.Fatalf("%s: %v", st.file, err)
					}
					// What kubectl prints: the error, and each warning
					// after "Warning: ".
					out := res.Message
					for _, w := range res.Warnings {
						out += "\nWarning: " + w
					}
					// A known difference expects the answer of Kyverno's
					// code instead of the chainsaw test's.
					want, has, hasNot, says := st.refused, st.has, st.hasNot, "kubectl would print"
					if d, ok := differs[suite+"/"+st.file]; ok {
						want, has, hasNot, says = &d.refused, []string{d.has}, nil, "Kyverno's webhook answers"
					}
					if want != nil && res.Allowed == *want {
						t.Errorf("%s %s: admitted = %v, want %v: %s", st.file, o.GetName(), res.Allowed, !*want, out)
						continue
					}
					for _, s := range has {
						if !strings.Contains(out, s) {
							t.Errorf("%s %s: %s %q; truce: %s", st.file, o.GetName(), says, s, out)
						}
					}
					for _, s := range hasNot {
						if strings.Contains(out, s) {
							t.Errorf("%s %s: kubectl would not print %q; truce: %s", st.file, o.GetName(), s, out)
						}
					}
					if !res.Allowed {
						continue
					}
					reconfigure, err := chain.Commit(res)
					if err != nil {
						t.Fatal(err)
					}
					if reconfigure {
						chain.Close()
						if chain, err = admission.NewChain(testContext(t), chain.State(), admission.Options{Engines: []admission.PolicyEngine{eng}}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		})
	}
	t.Logf("%d policies judged", judged)
}
