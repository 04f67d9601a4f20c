package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/internal/certs"
	"github.com/truce-dev/truce/lint"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/webhook/configuration"
)

const lintTestdata = "../../lint/testdata/"

func TestLintCommand(t *testing.T) {
	bad := lintTestdata + "webhook-fail-closed-without-exclusion/bad.yaml"
	good := lintTestdata + "webhook-fail-closed-without-exclusion/good.yaml"
	warnOnly := lintTestdata + "webhook-timeout-too-long/bad.yaml"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    []string
		wantErrOut string
	}{
		{"an error finding exits 1", []string{"lint", bad}, 1, []string{
			bad + `:1: error webhook-fail-closed-without-exclusion: webhooks[0] "validate.policy.example.com" fails closed`,
			"    object: ValidatingWebhookConfiguration policy.example.com",
			"    why: With failurePolicy Fail",
			"    fix: Exclude those namespaces",
			"1 finding: 1 error",
		}, ""},
		{"clean exits 0", []string{"lint", good}, 0, []string{"no findings"}, ""},
		{"a warning passes the default threshold", []string{"lint", warnOnly}, 0, []string{"warning webhook-timeout-too-long"}, ""},
		{"--fail-on warning", []string{"lint", warnOnly, "--fail-on", "warning"}, 1, nil, ""},
		{"--fail-on info", []string{"lint", warnOnly, "--fail-on=info"}, 1, nil, ""},
		{"--fail-on none", []string{"lint", bad, "--fail-on", "none"}, 0, []string{"1 finding"}, ""},
		{"--disable", []string{"lint", bad, "--disable", "webhook-fail-closed-without-exclusion"}, 0, []string{"no findings"}, ""},
		{"--disable, comma-separated", []string{"lint", warnOnly, "--disable", "webhook-timeout-too-long,webhook-failure-policy-unset", "--fail-on", "info"}, 0, []string{"no findings"}, ""},
		{"--max-webhook-timeout", []string{"lint", lintTestdata + "webhook-serial-timeouts/bad.yaml", "--max-webhook-timeout", "10s", "--fail-on", "info"}, 0, []string{"no findings"}, ""},
		{"directory, several rules", []string{"lint", lintTestdata}, 1, []string{"argocd-json-pointer-list-index", "webhook-matches-leases", "webhook-side-effects"}, ""},
		{"a Gatekeeper mutator against Argo CD self-heal", []string{"lint", "../../examples/gatekeeper-assign"}, 1, []string{
			"error admission-gitops-loop: webhook mutation.gatekeeper.sh (admission) and argocd-controller write /spec/template/spec/containers/0/imagePullPolicy back and forth",
		}, ""},
		{"--list-rules", []string{"lint", "--list-rules"}, 0, []string{"RULE", "webhook-matches-leases", "error"}, ""},
		{"unknown rule", []string{"lint", bad, "--disable", "no-such-rule"}, 2, nil, `unknown rule "no-such-rule"`},
		{"unknown format", []string{"lint", bad, "--format", "xml"}, 2, nil, `unknown --format "xml"`},
		{"unknown threshold", []string{"lint", bad, "--fail-on", "fatal"}, 2, nil, `--fail-on: unknown severity "fatal"`},
		{"nothing to lint", []string{"lint"}, 2, nil, "nothing to lint"},
		{"bad input names file and line", []string{"lint", "testdata/broken.yaml"}, 2, nil, "testdata/broken.yaml:8: invalid YAML"},
		{"missing path", []string{"lint", "testdata/no-such-dir"}, 2, nil, "no-such-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if tt.wantErrOut != "" && !strings.Contains(errOut, tt.wantErrOut) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErrOut, errOut)
			}
		})
	}
}

func TestLintJSONAndSARIF(t *testing.T) {
	path := lintTestdata + "policy-binding-without-policy/bad.yaml"
	code, out, errOut := run(t, "lint", path, "--format", "json")
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep lint.JSONReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 2 || rep.Findings[0].Source != path+":1" || rep.Findings[0].Rule != lint.RulePolicyWithoutBinding ||
		rep.Findings[1].Rule != lint.RulePolicyBindingWithoutPolicy || rep.Findings[1].Severity != lint.SeverityError {
		t.Errorf("findings: %+v", rep.Findings)
	}

	code, out, _ = run(t, "lint", path, "--format", "sarif", "--disable", lint.RulePolicyWithoutBinding)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var log struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Rules []struct {
						ID string `json:"id"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID string `json:"ruleId"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" || len(log.Runs) != 1 || len(log.Runs[0].Results) != 1 || log.Runs[0].Results[0].RuleID != lint.RulePolicyBindingWithoutPolicy {
		t.Errorf("SARIF: %s", out)
	}
	for _, r := range log.Runs[0].Tool.Driver.Rules {
		if r.ID == lint.RulePolicyWithoutBinding {
			t.Errorf("a disabled rule is listed in SARIF")
		}
	}
	if len(log.Runs[0].Tool.Driver.Rules) != len(lint.Rules())-1 {
		t.Errorf("%d rules in SARIF, want %d", len(log.Runs[0].Tool.Driver.Rules), len(lint.Rules())-1)
	}
}

func TestLintStdin(t *testing.T) {
	data, err := os.ReadFile(lintTestdata + "webhook-side-effects/bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), []string{"lint", "-"}, bytes.NewReader(data), &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "<stdin>:1: error webhook-side-effects") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestLintTruceWebhookConfig: the configurations `truce webhook config`
// generates follow Kubernetes' Admission Webhook Good Practices, so lint has
// nothing to say about them, even for a policy on every resource (the
// generator keeps Leases out with a matchCondition, which lint evaluates as
// kube-apiserver).
func TestLintTruceWebhookConfig(t *testing.T) {
	everything := `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: owner-label}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]
  validations: [{expression: "has(object.metadata.labels)", message: labels required}]
`
	var wildcard map[string]any
	if err := yaml.Unmarshal([]byte(everything), &wildcard); err != nil {
		t.Fatal(err)
	}
	ca, _, err := certs.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	policies, err := manifest.LoadPaths(context.Background(), []string{"../../examples/image-mirror/cluster"}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []struct {
		name     string
		policies []*unstructured.Unstructured
		allow    []string // rules the configuration may trigger
	}{
		{"image-mirror", objectsOf(policies), nil},
		// A policy on everything makes a webhook on everything: that is
		// the policy's doing, and said so.
		{"every resource", []*unstructured.Unstructured{{Object: wildcard}}, []string{lint.RuleWebhookMatchesEverything}},
	} {
		t.Run(set.name, func(t *testing.T) {
			cfgs, err := configuration.Generate(set.policies, configuration.Options{
				Service: &configuration.Service{Namespace: "truce-system", Name: "truce-webhook"}, CABundle: ca.PEM,
			})
			if err != nil {
				t.Fatal(err)
			}
			objs, err := cfgs.Objects()
			if err != nil {
				t.Fatal(err)
			}
			var docs []string
			for _, o := range objs {
				b, err := yaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(b))
			}
			file := filepath.Join(t.TempDir(), "webhooks.yaml")
			if err := os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := run(t, "lint", file, "--format", "json")
			if code == 2 {
				t.Fatal(errOut)
			}
			var rep lint.JSONReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Findings {
				allowed := false
				for _, a := range set.allow {
					allowed = allowed || f.Rule == a
				}
				if !allowed {
					t.Errorf("%s: %s %s: %s", f.Source, f.Severity, f.Rule, f.Message)
				}
			}
		})
	}
}

func objectsOf(objs []manifest.Object) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.Object
	}
	return out
}

func TestParamRefs(t *testing.T) {
	objs, err := manifest.LoadPaths(context.Background(), []string{lintTestdata + "policy-binding-param-missing/bad.yaml"}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := paramRefs(objs)
	if len(got) != 1 || got[0].gvk.Kind != "ConfigMap" || got[0].gvk.Group != "" || got[0].namespace != "policy-system" {
		t.Errorf("got %+v", got)
	}
}

// TestCheckReportsLintFindings: truce check's report carries truce lint's
// findings on the same files (but not the loop rule, which is the check's
// own verdict).
func TestCheckReportsLintFindings(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: default}\ndata: {k: v}\n",
		"policy.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: unbound}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "true"
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runTruce(t, "check", dir, "--no-verify", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := filepath.Join(dir, "policy.yaml") + ":1"
	if !strings.Contains(out, `"source": "`+want+`"`) || !strings.Contains(out, "warning policy-without-binding:") {
		t.Fatalf("the report does not carry the policy-without-binding finding at %s:\n%s", want, out)
	}
}

// TestCheckShowsArgoPointerProblemsOnce: an Argo CD jsonPointers entry
// with an unescaped "/" or a list index is reported by the check itself
// (against the objects) and by truce lint's rules; truce check shows it
// once, and lint's other findings still.
func TestCheckShowsArgoPointerProblemsOnce(t *testing.T) {
	_, out, errOut := run(t, "check", "testdata/argo-pointers")
	for _, pointer := range []string{`"/metadata/annotations/example.com/owner"`, `"/spec/template/spec/containers/0/image"`} {
		if n := strings.Count(out, pointer); n != 1 {
			t.Errorf("%s shown %d times:\n%s%s", pointer, n, out, errOut)
		}
	}
	if !strings.Contains(out, "argocd-ignore-differences-not-respected") {
		t.Errorf("lint's other finding is missing:\n%s", out)
	}
	// truce lint alone still reports both pointers.
	_, out, _ = run(t, "lint", "testdata/argo-pointers")
	for _, rule := range []string{"argocd-json-pointer-unescaped-slash", "argocd-json-pointer-list-index"} {
		if !strings.Contains(out, rule) {
			t.Errorf("truce lint lost %s:\n%s", rule, out)
		}
	}
}
