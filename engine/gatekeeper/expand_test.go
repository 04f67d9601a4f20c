package gatekeeper_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
)

// How gator judges a mutation.
//
// `gator expand` (pkg/gator/expand) mutates only the resultants of an
// ExpansionTemplate: it mutates each generator it reads (and prints
// nothing of it), expands it into the resultant the template names, and
// prints that resultant after Gatekeeper's mutation system ran on it
// (pkg/expansion System.expand). So the object of interest X is wrapped in
// a generator of a kind nothing else matches (judgeGroup/Object, X under
// spec.object) with an ExpansionTemplate from that kind to X's kind whose
// templateSource is spec.object: the resultant is X itself, with three
// changes pkg/expansion makes (expandResource): its name becomes
// "<generator>-<kind>" (so X is named that way, and the generator after
// it), its namespace the generator's (the generator sits in X's
// namespace), and an ownerReference to the generator is added (taken off
// gator's answer again).
//
// X is what kube-apiserver hands Gatekeeper's webhook: the written object
// admitted through truce's chain without Gatekeeper (defaulted, with the
// built-in admission plugins' changes and the metadata the server sets).
// gator's mutated X is then written through the same chain, so the API
// server's decoding and defaulting of a webhook's answer apply to it too,
// and what it stores must be what truce stores when Gatekeeper's webhook
// is in the chain. A mutation error in gator (exit 1) must be Gatekeeper's
// mutation webhook denying the write in truce with the same error.
//
// Where gator expand is not Gatekeeper's webhook, a case says so in
// gatorDiffers with Gatekeeper's source, and the test asserts that gator's
// answer does differ (so the case notices when it stops differing).
const judgeGroup = "judge.truce.dev"

// mutationCase is an object written into a cluster holding Gatekeeper
// mutators.
type mutationCase struct {
	name string
	// mutators are YAML documents: Gatekeeper mutators (and Namespaces,
	// which are stored in the cluster).
	mutators string
	object   string
	// gatorDiffers says why gator expand answers otherwise than
	// Gatekeeper's webhook, naming Gatekeeper's source.
	gatorDiffers string
}

// mutationAnswer is gator's answer for a case: the mutated object, or its
// error (the mutation's UUID taken out).
type mutationAnswer struct {
	Object map[string]any `json:"object,omitempty"`
	Error  string         `json:"error,omitempty"`
}

const mutationLibraryDir = "testdata/mutation/library/mutation"

// libraryMutationCases pairs every mutation sample of gatekeeper-library's
// mutation/ directory with the example objects of the same directory, and
// all the library's mutators together with every example.
func libraryMutationCases(t *testing.T) []mutationCase {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(mutationLibraryDir, "*", "*", "samples"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no samples under %s: %v", mutationLibraryDir, err)
	}
	// mutation-fsGroup.yaml's Assign is named k8spspfsGroup, a name the
	// API server refuses (not a lowercase RFC 1123 subdomain): its cases
	// are rejected, and it is left out of the library's mutators together.
	const refused = "mutation-fsGroup.yaml"
	var all []string
	var allExamples []string
	var out []mutationCase
	for _, dir := range dirs {
		muts, _ := filepath.Glob(filepath.Join(dir, "mutation*.yaml"))
		examples, _ := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
		for _, m := range muts {
			mb, err := os.ReadFile(m)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(m) != refused {
				all = append(all, string(mb))
			}
			for _, e := range examples {
				eb, err := os.ReadFile(e)
				if err != nil {
					t.Fatal(err)
				}
				rel, _ := filepath.Rel(mutationLibraryDir, m)
				erel, _ := filepath.Rel(dir, e)
				out = append(out, mutationCase{name: "library/" + rel + "+" + erel, mutators: string(mb), object: string(eb)})
			}
		}
		allExamples = append(allExamples, examples...)
	}
	for _, e := range allExamples {
		eb, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(mutationLibraryDir, e)
		out = append(out, mutationCase{name: "library/all+" + rel, mutators: strings.Join(all, "\n---\n"), object: string(eb)})
	}
	return out
}

// TestGatorExpand judges the mutations of Gatekeeper's webhook in truce's
// chain by gator expand of the same Gatekeeper version, on
// gatekeeper-library's mutation samples and truce's own cases. gator's
// answers are recorded in testdata/mutation-gator.json; with TRUCE_GATOR
// set the test asks gator itself (-update records).
func TestGatorExpand(t *testing.T) {
	gator := os.Getenv("TRUCE_GATOR")
	if *update && gator == "" {
		t.Fatal("-update needs TRUCE_GATOR")
	}
	const golden = "testdata/mutation-gator.json"
	recorded := map[string]mutationAnswer{}
	if gator == "" {
		b, err := os.ReadFile(golden)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err == nil {
			if err := json.Unmarshal(b, &recorded); err != nil {
				t.Fatalf("%s: %v", golden, err)
			}
		}
	}
	answers := map[string]mutationAnswer{}
	cases := append(libraryMutationCases(t), ownMutationCases...)
	var equal, differ, failed int
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := newJudgeCase(t, tc)
			var want mutationAnswer
			if gator != "" {
				want = j.gator(t, gator)
				answers[tc.name] = want
			} else {
				var ok bool
				if want, ok = recorded[tc.name]; !ok {
					t.Fatalf("no answer of gator recorded in %s (run with TRUCE_GATOR and -update)", golden)
				}
			}
			got, gotErr := j.truce(t)
			var diff string
			switch {
			case want.Error != "" || gotErr != "":
				// gator wraps the mutation system's error in its
				// expansion's.
				_, gatorErr, found := strings.Cut(want.Error, ": failed to mutate resultant resource "+j.sent.GetName()+": ")
				if !found {
					gatorErr = want.Error
				}
				if gatorErr != gotErr {
					diff = fmt.Sprintf("gator expand's error: %q\ntruce's Gatekeeper mutation error: %q", want.Error, gotErr)
				}
			default:
				diff = cmp.Diff(j.store(t, want.Object), got)
			}
			if tc.gatorDiffers != "" {
				if diff == "" {
					t.Errorf("gator answers as truce, but the case says they differ: %s", tc.gatorDiffers)
				}
				differ++
				return
			}
			if diff != "" {
				t.Errorf("truce stores otherwise than gator expand's mutation (-gator +truce):\n%s", diff)
				return
			}
			if gotErr != "" {
				failed++
			}
			equal++
		})
	}
	if *update {
		b, err := json.MarshalIndent(answers, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d cases equal to gator expand (%d of them Gatekeeper's mutation failing), %d where gator expand is not the webhook", equal, failed, differ)
	if equal < 60 {
		t.Errorf("only %d cases equal to gator, want at least 60", equal)
	}
}

// judgeCase is a case's cluster and the object Gatekeeper's webhook is
// sent.
type judgeCase struct {
	cluster  []*unstructured.Unstructured // mutators and namespaces
	base     []*unstructured.Unstructured // namespaces only
	mutators []*unstructured.Unstructured
	write    *unstructured.Unstructured
	// sent is what kube-apiserver sends Gatekeeper's webhook.
	sent      *unstructured.Unstructured
	namespace *unstructured.Unstructured
}

func newJudgeCase(t *testing.T, tc mutationCase) *judgeCase {
	t.Helper()
	j := &judgeCase{}
	for _, o := range objects(t, tc.mutators) {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
			j.base = append(j.base, o)
		} else {
			j.mutators = append(j.mutators, o)
		}
	}
	obj := objects(t, tc.object)
	if len(obj) != 1 {
		t.Fatalf("%d objects to write, want 1", len(obj))
	}
	j.write = obj[0]
	r, err := builtins.ForKind(j.write.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	if r.Namespaced && j.write.GetNamespace() == "" {
		j.write.SetNamespace("default")
	}
	// pkg/expansion names a resultant "<generator>-<kind>".
	if suffix := "-" + strings.ToLower(j.write.GetKind()); !strings.HasSuffix(j.write.GetName(), suffix) {
		j.write.SetName(j.write.GetName() + suffix)
	}
	j.cluster = append(slices.Clone(j.base), j.mutators...)
	state, err := admission.NewState(j.base...)
	if err != nil {
		t.Fatal(err)
	}
	if ns := j.write.GetNamespace(); ns != "" {
		stored, ok := state.Get(k8sschema.GroupKind{Kind: "Namespace"}, "", ns)
		if !ok {
			t.Fatalf("namespace %s is not in the cluster", ns)
		}
		j.namespace = stored
	}
	res, err := admitOnce(j.base, admission.Request{Object: j.write.DeepCopy()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed {
		t.Fatalf("the API server rejects the object before Gatekeeper's webhook: %s", res.Message)
	}
	j.sent = &unstructured.Unstructured{Object: res.Object}
	return j
}

// truce writes the object through a chain with Gatekeeper: what it
// stores, or Gatekeeper's error when its mutation webhook denies the
// write. Gatekeeper's handler answers a mutation error with
// admission.Errored (pkg/webhook/mutation.go), a denial with code 500,
// not a failed call: failurePolicy Ignore does not let the write through.
func (j *judgeCase) truce(t *testing.T) (map[string]any, string) {
	t.Helper()
	res, err := admitOnce(j.cluster, admission.Request{Object: j.write.DeepCopy()}, []admission.PolicyEngine{testEngine})
	if invalid := (*admission.InvalidObjectError)(nil); errors.As(err, &invalid) {
		t.Skipf("the API server refuses a mutator, so no cluster holds it (gator reads it): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed {
		const prefix = `admission webhook "mutation.gatekeeper.sh" denied the request: `
		if !strings.HasPrefix(res.Message, prefix) {
			t.Fatalf("denied by something else than Gatekeeper's mutation: %s", res.Message)
		}
		return nil, uuidRE.ReplaceAllString(strings.TrimPrefix(res.Message, prefix), "UUID")
	}
	return comparable(res.Object), ""
}

// store writes gator's mutated object through the chain without
// Gatekeeper, as the API server decodes and defaults a webhook's answer.
func (j *judgeCase) store(t *testing.T, mutated map[string]any) map[string]any {
	t.Helper()
	o := (&unstructured.Unstructured{Object: mutated}).DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	res, err := admitOnce(j.base, admission.Request{Object: o}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed {
		t.Fatalf("the API server rejects gator's mutated object: %s", res.Message)
	}
	return comparable(res.Object)
}

// comparable leaves out what the API server sets anew on every write:
// the metadata it sets, and the random suffix of the service account
// token volume its ServiceAccount admission plugin adds to a Pod.
func comparable(obj map[string]any) map[string]any {
	o := (&unstructured.Unstructured{Object: obj}).DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	b, err := json.Marshal(o.Object)
	if err != nil {
		panic(err)
	}
	b = tokenVolumeRE.ReplaceAll(b, []byte("kube-api-access-RANDOM"))
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return out.Object
}

var tokenVolumeRE = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)

// uuidRE matches the mutation UUID in Gatekeeper's errors.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// gator asks gator expand for the sent object wrapped in a generator.
func (j *judgeCase) gator(t *testing.T, gator string) mutationAnswer {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, o map[string]any) {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range j.mutators {
		write("mutator-"+string(rune('a'+i))+".yaml", m.Object)
	}
	if j.namespace != nil {
		write("namespace.yaml", j.namespace.Object)
	}
	gvk := j.sent.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	generator := strings.TrimSuffix(j.sent.GetName(), "-"+kind)
	write("template.yaml", map[string]any{
		"apiVersion": "expansion.gatekeeper.sh/v1alpha1", "kind": "ExpansionTemplate",
		"metadata": map[string]any{"name": "judge"},
		"spec": map[string]any{
			"applyTo":        []any{map[string]any{"groups": []any{judgeGroup}, "versions": []any{"v1"}, "kinds": []any{"Object"}}},
			"templateSource": "spec.object",
			"generatedGVK":   map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
		},
	})
	meta := map[string]any{"name": generator}
	if ns := j.sent.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	write("generator.yaml", map[string]any{
		"apiVersion": judgeGroup + "/v1", "kind": "Object", "metadata": meta,
		"spec": map[string]any{"object": j.sent.Object},
	})
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gator, "expand", "--filename="+dir, "--format=json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if cmd.ProcessState.ExitCode() != 1 {
			t.Fatalf("gator expand: %v\n%s", err, stderr.String())
		}
		return mutationAnswer{Error: uuidRE.ReplaceAllString(strings.TrimSpace(stderr.String()), "UUID")}
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(doc)); err != nil {
			t.Fatalf("gator expand output: %v\n%s", err, stdout.String())
		}
		out = append(out, u)
	}
	if len(out) != 1 {
		t.Fatalf("gator expand answered %d objects, want 1:\n%s", len(out), stdout.String())
	}
	// expandResource's ownerReference to the generator.
	refs := out[0].GetOwnerReferences()
	refs = slices.DeleteFunc(refs, func(r metav1.OwnerReference) bool {
		return r.APIVersion == judgeGroup+"/v1" && r.Kind == "Object" && r.Name == generator
	})
	if len(refs) == 0 {
		unstructured.RemoveNestedField(out[0].Object, "metadata", "ownerReferences")
	} else {
		out[0].SetOwnerReferences(refs)
	}
	return mutationAnswer{Object: out[0].Object}
}
