package kyverno

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestNoteInstall(t *testing.T) {
	policy := func(s string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	objs := []*unstructured.Unstructured{
		policy(`{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: asks}, spec: {rules: [{name: r, validate: {cel: {generate: true}}}]}}`),
		policy(`{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: silent}, spec: {rules: [{name: r, validate: {cel: {}}}]}}`),
		policy(`{apiVersion: policies.kyverno.io/v1, kind: ValidatingPolicy, metadata: {name: vp}, spec: {autogen: {validatingAdmissionPolicy: {enabled: true}}}}`),
		policy(`{apiVersion: policies.kyverno.io/v1, kind: MutatingPolicy, metadata: {name: mp}, spec: {autogen: {mutatingAdmissionPolicy: {enabled: false}}}}`),
		policy(`{apiVersion: policies.kyverno.io/v1, kind: MutatingPolicy, metadata: {name: generated}, spec: {autogen: {mutatingAdmissionPolicy: {enabled: true}}}}`),
	}
	gen := &generatedPolicies{
		warnings: []string{"generator warning"},
		statuses: []AdmissionPolicyStatus{
			{Kind: "ClusterPolicy", Name: "asks", Message: "skip generating ValidatingAdmissionPolicy: autogen"},
			{Kind: "ClusterPolicy", Name: "silent", Message: "validate.cel.generate is not set to true"},
			{Kind: "ValidatingPolicy", Name: "vp", Message: "refused"},
			{Kind: "MutatingPolicy", Name: "mp", Message: "not asked"},
			{Kind: "MutatingPolicy", Name: "generated", Generated: true, Message: "ok"},
		},
	}
	e := &Engine{}
	// Installed twice (the chain is rebuilt): each note once.
	for range 2 {
		e.noteInstall(objs, gen, []string{"load warning"})
	}
	got := e.Notes()
	want := []string{"generator warning", "ClusterPolicy asks", "ValidatingPolicy vp", "load warning"}
	if len(got) != len(want) {
		t.Fatalf("notes %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("note %d = %q, want it to start with %q", i, got[i], w)
		}
	}
	if slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, "silent") || strings.Contains(n, " mp ") }) {
		t.Errorf("notes %q name a policy that did not ask", got)
	}
}

// TestFailureNotes keeps what Kyverno's controllers failed at as notes:
// each distinct failure once, a few per source, then one note that says
// more were left out, and the sources counted apart.
func TestFailureNotes(t *testing.T) {
	var n notes
	n.failures("generate rule p/r", []string{"p/r: cannot find namespace", "p/r: cannot find namespace"})
	for i := range 8 {
		n.failures("cleanup policies", []string{"CleanupPolicy x: invalid " + strings.Repeat("!", i)})
	}
	n.failures("generate rule p/r", []string{"p/r: cannot find namespace"})
	got := n.list
	want := []string{
		"generate rule p/r: p/r: cannot find namespace",
		"cleanup policies: CleanupPolicy x: invalid ",
		"cleanup policies: CleanupPolicy x: invalid !",
		"cleanup policies: CleanupPolicy x: invalid !!",
		"cleanup policies: CleanupPolicy x: invalid !!!",
		"cleanup policies: CleanupPolicy x: invalid !!!!",
		"cleanup policies: more failures than the 5 above (" + LogEnv + "=1 logs every one)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("notes\ngot  %q\nwant %q", got, want)
	}
}
