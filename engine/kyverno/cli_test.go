package kyverno_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno"
)

// updateCLI rewrites the recorded answers of the kyverno CLI
// (testdata/cli-answers). TRUCE_KYVERNO_CLI names the binary, built from
// the helper's module at the Kyverno version it pins (make kyverno-cli).
var updateCLI = flag.Bool("update", false, "record the kyverno CLI's answers in testdata/cli-answers (needs TRUCE_KYVERNO_CLI)")

// cliEnv names the kyverno CLI: set, the test asks it instead of reading
// the recorded answers, and fails where they differ.
const cliEnv = "TRUCE_KYVERNO_CLI"

// cliCorpus is testdata/cli-corpus.yaml: the suites of Kyverno's CLI tests
// (testdata/cli, copied unchanged) that are admission decisions.
type cliCorpus struct {
	Suites []cliSuiteEntry `json:"suites"`
	// Skipped lists the suites of Kyverno v1.19.1's test/cli that are not
	// in the corpus, with the reason: nothing reads it, it documents.
	Skipped []struct {
		Dirs   []string `json:"dirs"`
		Reason string   `json:"reason"`
	} `json:"skipped"`
}

type cliSuiteEntry struct {
	Dir string `json:"dir"`
	// Own: the suite is truce's (testdata/cli-own), not Kyverno's.
	Own bool `json:"own,omitempty"`
	// Skip names resources ("Kind/name") not judged, with the reason.
	Skip map[string]string `json:"skip,omitempty"`
	// Differ names resources ("Kind/name") where the CLI's answer is not
	// what Kyverno's webhook answers, with the reason and the Kyverno
	// source that makes it; the test checks truce against the webhook's
	// answer (Webhook) and that the CLI indeed answers differently.
	Differ map[string]cliDifference `json:"differ,omitempty"`
	// Namespaces are labels of Namespaces the cluster holds (the CLI's
	// values files give them as namespaceSelector labels).
	Namespaces map[string]map[string]string `json:"namespaces,omitempty"`
}

type cliDifference struct {
	Reason string `json:"reason"`
	// Allowed and Message are the webhook's answer truce must give.
	Allowed bool   `json:"allowed"`
	Message string `json:"message,omitempty"`
	// Unmutated: the webhook leaves the object as written although the CLI
	// patches it.
	Unmutated bool `json:"unmutated,omitempty"`
}

// kyvernoTest is the part of a kyverno-test.yaml the corpus reads.
type kyvernoTest struct {
	Policies   []string `json:"policies"`
	Resources  []string `json:"resources"`
	Exceptions []string `json:"exceptions"`
	// Variables is a values file: the CLI takes the Namespaces it lists
	// (namespaceObject, namespaceSelector); the cluster holds them.
	Variables string `json:"variables"`
	Results   []struct {
		Kind             string   `json:"kind"`
		Policy           string   `json:"policy"`
		Rule             string   `json:"rule"`
		Resources        []string `json:"resources"`
		Result           string   `json:"result"`
		PatchedResources string   `json:"patchedResources"`
	} `json:"results"`
}

// cliAnswer is what `kyverno apply -p -o` says of a suite: the policy
// report's results and the patched resources.
type cliAnswer struct {
	Args    []string         `json:"args"`
	Results []cliResult      `json:"results"`
	Patched []map[string]any `json:"patched,omitempty"`
}

type cliResult struct {
	Policy    string `json:"policy"`
	Rule      string `json:"rule,omitempty"`
	Result    string `json:"result"`
	Message   string `json:"message,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// TestCLICorpus compares truce's chain with the kyverno CLI on Kyverno's
// own CLI test suites: every resource of a suite is written through the
// chain with the suite's policies and exceptions in the cluster, and the
// answer must be the one Kyverno's admission webhook gives for the
// per-rule results `kyverno apply` reports (recorded in
// testdata/cli-answers, or asked of TRUCE_KYVERNO_CLI): denied with the
// messages of the failing Enforce/Deny rules, warnings of Warn actions
// and emitWarning policies, the resource patched as the CLI patches it.
// Each suite's kyverno-test.yaml assertions are checked against the CLI's
// answer and its patchedResources against truce's object.
func TestCLICorpus(t *testing.T) {
	cli := os.Getenv(cliEnv)
	if *updateCLI && cli == "" {
		t.Fatalf("-update needs %s (make kyverno-cli builds bin/kyverno)", cliEnv)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "cli-corpus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus cliCorpus
	if err := yaml.UnmarshalStrict(data, &corpus); err != nil {
		t.Fatalf("testdata/cli-corpus.yaml: %v", err)
	}
	// One helper serves every suite's chain, each its own set of
	// policies: starting Kyverno once instead of per suite.
	eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
	t.Cleanup(eng.Close)
	judged, ran := 0, 0
	var stats cliStats
	for _, entry := range corpus.Suites {
		t.Run(entry.Dir, func(t *testing.T) {
			ran++
			judged += runCLISuite(t, eng, &stats, cli, entry)
		})
	}
	t.Logf("%d resources in %d suites judged: %d denied, %d admitted (%d patched, %d with Kyverno warnings)",
		judged, ran, stats.denied, judged-stats.denied, stats.patched, stats.warned)
	if ran == len(corpus.Suites) && judged < 60 {
		t.Errorf("%d resources judged, the corpus promises at least 60", judged)
	}
}

func runCLISuite(t *testing.T, eng *kyverno.Engine, stats *cliStats, cli string, entry cliSuiteEntry) int {
	dir := filepath.Join("testdata", "cli", filepath.FromSlash(entry.Dir))
	if entry.Own {
		dir = filepath.Join("testdata", "cli-own", filepath.FromSlash(entry.Dir))
	}
	var spec kyvernoTest
	data, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &spec); err != nil {
		t.Fatalf("%s/kyverno-test.yaml: %v", dir, err)
	}
	answer := cliAnswerFor(t, cli, dir, spec)

	var policies, exceptions, resources []*unstructured.Unstructured
	for _, f := range spec.Policies {
		policies = append(policies, readDocs(t, filepath.Join(dir, f))...)
	}
	for _, f := range spec.Exceptions {
		exceptions = append(exceptions, readDocs(t, filepath.Join(dir, f))...)
	}
	for _, f := range spec.Resources {
		resources = append(resources, readDocs(t, filepath.Join(dir, f))...)
	}

	// What kyverno-test.yaml expects is what the CLI answers.
	for _, r := range spec.Results {
		if r.PatchedResources != "" {
			continue // checked against truce's object below
		}
		for _, name := range r.Resources {
			ns, n := "", name
			if i := strings.Index(name, "/"); i >= 0 {
				ns, n = name[:i], name[i+1:]
			}
			got := answer.result(r.Policy, r.Rule, r.Kind, ns, n)
			// kyverno test names a pod rule for the rules Kyverno
			// generates from it for pod controllers.
			for _, prefix := range []string{"autogen-", "autogen-cronjob-"} {
				if got == "" && r.Rule != "" {
					got = answer.result(r.Policy, prefix+r.Rule, r.Kind, ns, n)
				}
			}
			if got == "" && r.Result == "skip" {
				// kyverno apply's report leaves out some skipped rules
				// (foreach with no element matching), kyverno test
				// counts them as skipped.
				continue
			}
			if got != r.Result {
				t.Errorf("kyverno-test.yaml expects %s for %s/%s, policy %s rule %s; the CLI answers %q", r.Result, r.Kind, name, r.Policy, r.Rule, got)
			}
		}
	}

	if spec.Variables != "" {
		var values struct {
			Namespaces []struct {
				Metadata struct {
					Name   string            `json:"name"`
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"namespaces"`
		}
		data, err := os.ReadFile(filepath.Join(dir, spec.Variables))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &values); err != nil {
			t.Fatalf("%s: %v", spec.Variables, err)
		}
		if entry.Namespaces == nil {
			entry.Namespaces = map[string]map[string]string{}
		}
		for _, ns := range values.Namespaces {
			entry.Namespaces[ns.Metadata.Name] = ns.Metadata.Labels
		}
	}
	actions := policyActions(policies)
	judged := 0
	// Chains live as long as the suite. A Namespace the suite writes is
	// absent from its chain's cluster, so that writing it is a CREATE, as
	// in the CLI.
	chains := map[string]*admission.Chain{}
	chainFor := func(res *unstructured.Unstructured) *admission.Chain {
		omit := ""
		if res.GetKind() == "Namespace" {
			omit = res.GetName()
		}
		if _, ok := chains[omit]; !ok {
			chains[omit] = cliChain(t, eng, entry, resources, policies, exceptions, omit)
		}
		return chains[omit]
	}
	for _, res := range resources {
		key := res.GetKind() + "/" + res.GetName()
		if reason, ok := entry.Skip[key]; ok {
			t.Logf("%s not judged: %s", key, reason)
			continue
		}
		judged++
		chain := chainFor(res)
		t.Run(key, func(t *testing.T) {
			got, err := chain.Admit(testContext(t), admission.Request{Object: res.DeepCopy()})
			if err != nil {
				t.Fatal(err)
			}
			want := webhookAnswer(answer, actions, res)
			if d, ok := entry.Differ[key]; ok {
				if want.allowed == d.Allowed && (d.Message == "" || slices.Contains(want.denials, d.Message)) && !d.Unmutated {
					t.Errorf("listed as a difference (%s), but the CLI answers as the webhook: allowed %v, %q", d.Reason, want.allowed, want.denials)
				}
				want = expected{allowed: d.Allowed}
				if d.Message != "" {
					want.denials = []string{d.Message}
				}
				if d.Unmutated {
					want.patched = nil
				}
				t.Logf("the CLI differs from the webhook here: %s", d.Reason)
			}
			compareAnswer(t, got, want, res)
			tally(stats, want, res)
			// kyverno test's patchedResources: pass when the patched
			// resource is the file's, fail when it is not.
			for _, r := range spec.Results {
				if r.PatchedResources == "" || r.Kind != res.GetKind() || !slices.Contains(r.Resources, res.GetName()) || !got.Allowed {
					continue
				}
				for _, p := range readDocs(t, filepath.Join(dir, r.PatchedResources)) {
					if p.GetKind() != res.GetKind() || p.GetName() != res.GetName() {
						continue
					}
					what := "kyverno-test.yaml's patchedResources " + r.PatchedResources
					if r.Result == "fail" {
						if len(patchDiffers(got.Object, res.Object, p.Object)) == 0 {
							t.Errorf("%s: kyverno test expects the patched resource to differ from it; truce's object does not", what)
						}
						continue
					}
					for _, e := range patchDiffers(got.Object, res.Object, p.Object) {
						t.Errorf("%s: %s", what, e)
					}
				}
			}
		})
	}
	return judged
}

// cliChain is a chain whose cluster holds the Namespaces the suite's
// resources name (with the corpus's labels, but not omit), its policies
// and its exceptions.
func cliChain(t *testing.T, eng *kyverno.Engine, entry cliSuiteEntry, resources, policies, exceptions []*unstructured.Unstructured, omit string) *admission.Chain {
	t.Helper()
	names := map[string]bool{"default": true}
	for _, o := range append(append(slices.Clone(resources), policies...), exceptions...) {
		if ns := o.GetNamespace(); ns != "" {
			names[ns] = true
		}
		if o.GetKind() == "Namespace" {
			names[o.GetName()] = true
		}
	}
	for ns := range entry.Namespaces {
		names[ns] = true
	}
	var cluster []*unstructured.Unstructured
	for ns := range names {
		if ns == omit {
			continue
		}
		labels := map[string]any{"kubernetes.io/metadata.name": ns}
		for k, v := range entry.Namespaces[ns] {
			labels[k] = v
		}
		cluster = append(cluster, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns, "labels": labels},
		}})
	}
	for _, o := range append(slices.Clone(policies), exceptions...) {
		cluster = append(cluster, o.DeepCopy())
	}
	state, err := admission.NewState(cluster...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(testContext(t), state, admission.Options{Engines: []admission.PolicyEngine{eng}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	return chain
}

// readDocs reads the objects of a YAML stream.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(m) == 0 {
			continue
		}
		if m["kind"] == "List" {
			items, _ := m["items"].([]any)
			for _, it := range items {
				out = append(out, &unstructured.Unstructured{Object: it.(map[string]any)})
			}
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// cliAnswerFor asks the CLI (cli set) or reads the recorded answer.
func cliAnswerFor(t *testing.T, cli, dir string, spec kyvernoTest) cliAnswer {
	t.Helper()
	rel, _ := filepath.Rel("testdata", dir)
	rel = strings.TrimPrefix(filepath.ToSlash(rel), "cli/")
	record := filepath.Join("testdata", "cli-answers", strings.ReplaceAll(rel, "/", "_")+".json")
	var recorded cliAnswer
	data, readErr := os.ReadFile(record)
	if readErr == nil {
		if err := json.Unmarshal(data, &recorded); err != nil {
			t.Fatalf("%s: %v", record, err)
		}
	}
	if cli == "" {
		if readErr != nil {
			t.Fatalf("no recorded answer (%v): record it with %s=… go test -run TestCLICorpus -update", readErr, cliEnv)
		}
		return recorded
	}
	live := askCLI(t, cli, dir, spec)
	if *updateCLI {
		out, err := json.MarshalIndent(live, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(record), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(record, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return live
	}
	if readErr == nil && !reflect.DeepEqual(normalizeJSON(t, live), normalizeJSON(t, recorded)) {
		t.Errorf("the CLI's answer differs from %s: record it again with -update", record)
	}
	return live
}

func normalizeJSON(t *testing.T, v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// askCLI runs `kyverno apply` on the suite's files, in its directory:
// the policy report (-p, JSON) gives each rule's result and message, -o
// the patched resources.
func askCLI(t *testing.T, cli, dir string, spec kyvernoTest) cliAnswer {
	t.Helper()
	out := filepath.Join(t.TempDir(), "patched.yaml")
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"apply"}
	args = append(args, spec.Policies...)
	for _, r := range spec.Resources {
		args = append(args, "--resource", r)
	}
	for _, e := range spec.Exceptions {
		args = append(args, "--exception", e)
	}
	if spec.Variables != "" {
		args = append(args, "--values-file", spec.Variables)
	}
	args = append(args, "--policy-report", "--output-format", "json", "--remove-color")
	abs, err := filepath.Abs(cli)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(abs, append(args, "--output", out)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// kyverno apply exits 1 when a rule fails: the report is the answer.
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("kyverno %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
	}
	answer := cliAnswer{Args: args, Results: parseReports(t, stdout.Bytes())}
	patched, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The CLI writes the resource after each mutating policy; the last
	// document of a resource is the patched resource.
	last := map[string]int{}
	for _, doc := range splitDocs(t, patched) {
		k := objectKey(doc)
		if i, ok := last[k]; ok {
			answer.Patched[i] = doc
			continue
		}
		last[k] = len(answer.Patched)
		answer.Patched = append(answer.Patched, doc)
	}
	return answer
}

func splitDocs(t *testing.T, data []byte) []map[string]any {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("the CLI's patched resources: %v", err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}

func objectKey(m map[string]any) string {
	u := unstructured.Unstructured{Object: m}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// parseReports reads the policy reports `kyverno apply -p --output-format
// json` prints after its summary.
func parseReports(t *testing.T, out []byte) []cliResult {
	t.Helper()
	var results []cliResult
	// Between and around reports the CLI prints text: each report starts
	// at the next `{"kind":`.
	start := []byte(`{"kind":`)
	for pos := 0; ; {
		i := bytes.Index(out[pos:], start)
		if i < 0 {
			break
		}
		dec := json.NewDecoder(bytes.NewReader(out[pos+i:]))
		var report struct {
			Kind    string `json:"kind"`
			Results []struct {
				Policy    string `json:"policy"`
				Rule      string `json:"rule"`
				Result    string `json:"result"`
				Message   string `json:"message"`
				Resources []struct {
					Kind      string `json:"kind"`
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"resources"`
			} `json:"results"`
		}
		if err := dec.Decode(&report); err != nil {
			t.Fatalf("reading the CLI's policy report: %v\n%s", err, out)
		}
		for _, r := range report.Results {
			for _, res := range r.Resources {
				results = append(results, cliResult{Policy: r.Policy, Rule: r.Rule, Result: r.Result, Message: r.Message,
					Kind: res.Kind, Namespace: res.Namespace, Name: res.Name})
			}
		}
		pos += i + int(dec.InputOffset())
	}
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i], results[j]
		return fmt.Sprint(a.Kind, a.Namespace, a.Name, a.Policy, a.Rule) < fmt.Sprint(b.Kind, b.Namespace, b.Name, b.Policy, b.Rule)
	})
	return results
}

// result is the CLI's result for a rule of a policy on a resource; rule
// "" matches a CEL policy's result. Kyverno's test command matches the
// namespace only when the test names one.
func (a cliAnswer) result(policy, rule, kind, ns, name string) string {
	for _, r := range a.Results {
		if r.Kind == kind && r.Name == name && (ns == "" || r.Namespace == ns) &&
			(r.Policy == policy || strings.HasSuffix(r.Policy, "/"+policy)) && (rule == "" || r.Rule == rule) {
			return r.Result
		}
	}
	return ""
}

// sameNamespace: the CLI reports a namespaced resource written without a
// namespace in "default", as truce writes it.
func sameNamespace(cli, written string) bool {
	return cli == written || written == "" && cli == "default"
}

// cliStats counts the answers the corpus judged, for the log.
type cliStats struct{ denied, patched, warned int }

func tally(s *cliStats, want expected, res *unstructured.Unstructured) {
	switch {
	case !want.allowed:
		s.denied++
	default:
		for _, d := range diffPaths(res.Object, want.patched, "") {
			if want.patched != nil && d != "/metadata/namespace" { // the CLI's default namespace
				s.patched++
				break
			}
		}
		if len(want.warnings) > 0 {
			s.warned++
		}
	}
}

// action is what a policy's failing rule does at admission.
type action struct {
	enforce bool // denies (Enforce, or a CEL policy's Deny)
	warn    bool // a warning (emitWarning, or a CEL policy's Warn)
	cel     bool
	mutate  bool // a legacy mutate rule
}

// policyActions reads what each policy's failures do in Kyverno's
// webhook. Legacy policies: validationFailureAction or the rule's
// failureAction (Audit by default); CEL ValidatingPolicies:
// validationActions (Deny by default).
func policyActions(policies []*unstructured.Unstructured) map[string]map[string]action {
	out := map[string]map[string]action{}
	for _, p := range policies {
		rules := map[string]action{}
		name := p.GetName()
		switch p.GetKind() {
		case "ClusterPolicy", "Policy":
			top, _, _ := unstructured.NestedString(p.Object, "spec", "validationFailureAction")
			emit, _, _ := unstructured.NestedBool(p.Object, "spec", "emitWarning")
			list, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
			for _, r := range list {
				rm, _ := r.(map[string]any)
				rn, _ := rm["name"].(string)
				act, _, _ := unstructured.NestedString(rm, "validate", "failureAction")
				if act == "" {
					act = top
				}
				_, mutate := rm["mutate"]
				a := action{enforce: strings.EqualFold(act, "enforce"), warn: emit, mutate: mutate}
				rules[rn] = a
				rules["autogen-"+rn] = a
				rules["autogen-cronjob-"+rn] = a
			}
		case "ValidatingPolicy", "NamespacedValidatingPolicy":
			acts, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "validationActions")
			if len(acts) == 0 {
				acts = []string{"Deny"}
			}
			rules[""] = action{enforce: slices.Contains(acts, "Deny"), warn: slices.Contains(acts, "Warn"), cel: true}
		default:
			rules[""] = action{cel: true}
		}
		out[name] = rules
	}
	return out
}

// expected is Kyverno's webhook answer for the CLI's results.
type expected struct {
	allowed bool
	// denials are the failing rules as the webhook's message carries them:
	// "POLICY/RULE: MESSAGE" for legacy policies (pkg/webhooks/utils/block.go
	// GetBlockedMessages), "Policy NAME failed: MESSAGE" for CEL policies
	// (pkg/webhooks/resource/vpol/handler.go).
	denials  []string
	warnings []string
	patched  map[string]any
}

// webhookAnswer derives the webhook's answer from the CLI's per-rule
// results for res, as Kyverno's webhook handlers build it:
//   - a fail (or error) of an Enforce rule / Deny policy denies and is
//     listed in the message (pkg/webhooks/utils/block.go,
//     pkg/webhooks/resource/vpol/handler.go);
//   - warnings (pkg/webhooks/utils/warning.go): every rule response that
//     fails, errs or warns carries emitWarning (pkg/engine/api/
//     ruleresponse.go NewRuleResponse), so an admitted write is warned of
//     the failures of its mutate rules and of its validate rules in
//     Enforce policies and in emitWarning policies (the only Audit
//     policies the webhook evaluates: pkg/webhooks/resource/handlers.go);
//     an emitWarning mutate policy warns of every rule not skipped
//     (pkg/webhooks/resource/mutation/mutation.go); a CEL policy's Warn
//     action of its fails and errors;
//   - other Audit failures change nothing in the answer (they go to
//     policy reports).
func webhookAnswer(a cliAnswer, actions map[string]map[string]action, res *unstructured.Unstructured) expected {
	want := expected{allowed: true}
	for _, r := range a.Results {
		if r.Kind != res.GetKind() || r.Name != res.GetName() || !sameNamespace(r.Namespace, res.GetNamespace()) {
			continue
		}
		// The CLI names a namespaced Policy NAMESPACE/NAME, the webhook
		// by its name.
		policy := r.Policy[strings.LastIndex(r.Policy, "/")+1:]
		act, ok := actions[policy][r.Rule]
		if !ok {
			act = actions[policy][""]
		}
		bad := r.Result == "fail" || r.Result == "error"
		verb := "failed" // pkg/webhooks/resource/vpol/handler.go
		if r.Result == "error" {
			verb = "error"
		}
		legacyWarning := fmt.Sprintf("policy %s.%s: %s", policy, r.Rule, r.Message)
		switch {
		case act.cel:
			text := fmt.Sprintf("Policy %s %s: %s", policy, verb, r.Message)
			if bad && act.enforce {
				want.allowed = false
				want.denials = append(want.denials, text)
			}
			if bad && act.warn {
				want.warnings = append(want.warnings, text)
			}
		case act.mutate:
			if bad || r.Result == "warn" || act.warn && r.Result != "skip" {
				want.warnings = append(want.warnings, legacyWarning)
			}
		default:
			if bad && act.enforce {
				want.allowed = false
				want.denials = append(want.denials, policy+"/"+r.Rule+": "+r.Message)
			}
			if (bad || r.Result == "warn") && (act.enforce || act.warn) {
				want.warnings = append(want.warnings, legacyWarning)
			}
		}
	}
	for _, p := range a.Patched {
		u := unstructured.Unstructured{Object: p}
		if u.GetKind() == res.GetKind() && u.GetName() == res.GetName() && sameNamespace(u.GetNamespace(), res.GetNamespace()) {
			want.patched = p
		}
	}
	sort.Strings(want.denials)
	sort.Strings(want.warnings)
	return want
}

// compareAnswer compares truce's result with the webhook's answer.
func compareAnswer(t *testing.T, got *admission.Result, want expected, res *unstructured.Unstructured) {
	t.Helper()
	if got.Allowed != want.allowed {
		t.Fatalf("allowed = %v (%s), the CLI's results say %v: %q", got.Allowed, got.Message, want.allowed, want.denials)
	}
	if !got.Allowed {
		if denials := parseDenials(got.Message); !reflect.DeepEqual(denials, want.denials) {
			t.Errorf("denied for\n%q\nthe CLI's results say\n%q\n(message %q)", denials, want.denials, got.Message)
		}
		return
	}
	var warnings []string
	for _, w := range got.Warnings {
		if strings.HasPrefix(w, "policy ") || strings.HasPrefix(w, "Policy ") {
			warnings = append(warnings, w)
		}
	}
	sort.Strings(warnings)
	if !slices.Equal(warnings, want.warnings) {
		t.Errorf("warnings %q, the CLI's results say %q", warnings, want.warnings)
	}
	patched := want.patched
	if patched == nil {
		patched = res.Object
	}
	for _, e := range patchDiffers(got.Object, res.Object, patched) {
		t.Errorf("the CLI's patch: %s", e)
	}
	// What Kyverno's webhooks changed, the CLI changed.
	for _, c := range got.Changes {
		if !strings.Contains(c.By, "kyverno") {
			continue
		}
		gv, gok := pointer(got.Object, c.Path)
		pv, pok := pointer(patched, c.Path)
		if gok != pok || gok && !subset(pv, gv) {
			t.Errorf("%s changed %s to %v; the CLI's patched resource has %v", c.By, c.Path, gv, pv)
		}
	}
}

// parseDenials reads the failing rules out of a Kyverno denial: the YAML
// map of policy → rule → message after "was blocked due to the following
// policies", or the "Policy NAME failed: …" errors of CEL policies.
func parseDenials(msg string) []string {
	var out []string
	if i := strings.Index(msg, "was blocked due to the following policies"); i >= 0 {
		body := msg[i+len("was blocked due to the following policies"):]
		var m map[string]map[string]string
		if err := yaml.Unmarshal([]byte(body), &m); err != nil {
			return []string{"unparsable: " + err.Error()}
		}
		for p, rules := range m {
			for r, text := range rules {
				out = append(out, p+"/"+r+": "+text)
			}
		}
	} else if i := strings.Index(msg, "Policy "); i >= 0 {
		// multierr joins several with "; ".
		for _, part := range strings.Split(msg[i:], "; Policy ") {
			if !strings.HasPrefix(part, "Policy ") {
				part = "Policy " + part
			}
			out = append(out, part)
		}
	} else {
		out = []string{msg}
	}
	sort.Strings(out)
	return out
}

// patchDiffers lists how truce's object differs from a patched resource
// in the fields the patch changed (patched against the written object):
// every changed field must have the patched value in truce's object, every
// removed one be absent. truce's object went through the whole chain: API
// defaulting may add fields under a patched one, so a patched value need
// only be contained in truce's.
func patchDiffers(got, written, patched map[string]any) []string {
	var out []string
	for _, d := range diffPaths(written, patched, "") {
		pv, pok := pointer(patched, d)
		gv, gok := pointer(got, d)
		switch {
		case !pok && gok:
			out = append(out, fmt.Sprintf("no %s in the patched resource; truce's object has %v", d, gv))
		case pok && !gok:
			out = append(out, fmt.Sprintf("the patched resource sets %s to %v; truce's object has none", d, pv))
		case pok && !subset(pv, gv):
			out = append(out, fmt.Sprintf("the patched resource sets %s to %v; truce's object has %v", d, pv, gv))
		}
	}
	return out
}

// diffPaths lists JSON pointers where a and b differ: the deepest map
// keys; lists are compared whole.
func diffPaths(a, b any, prefix string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(normalizeNumbers(a), normalizeNumbers(b)) {
			return nil
		}
		return []string{prefix}
	}
	var out []string
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for k := range keys {
		p := prefix + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		// A null is an absent field (creationTimestamp: null in
		// patched resources).
		av, ain := am[k]
		bv, bin := bm[k]
		ain, bin = ain && av != nil, bin && bv != nil
		if !ain && !bin {
			continue
		}
		if ain != bin {
			out = append(out, p)
			continue
		}
		out = append(out, diffPaths(av, bv, p)...)
	}
	sort.Strings(out)
	return out
}

// pointer resolves a JSON pointer into maps and lists.
func pointer(obj any, p string) (any, bool) {
	if p == "" {
		return obj, true
	}
	cur := obj
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// subset: every field of want is in got with the same value (lists
// element by element, same length).
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subset(v, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normalizeNumbers(want), normalizeNumbers(got))
	}
}

// normalizeNumbers makes int64 and float64 of the same value equal (YAML
// and JSON decoding give different types).
func normalizeNumbers(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case int32:
		return float64(n)
	}
	return v
}
