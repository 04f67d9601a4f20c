package cli

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
)

// notingEngine is a policy engine with notes and nothing else.
type notingEngine struct {
	name  string
	notes []string
}

func (e *notingEngine) Name() string                        { return e.name }
func (e *notingEngine) Configures(k8sschema.GroupKind) bool { return false }
func (e *notingEngine) Notes() []string                     { return e.notes }
func (e *notingEngine) Install(context.Context, []*unstructured.Unstructured) (*admission.Installation, error) {
	return &admission.Installation{}, nil
}

// TestEngineNotes names each note by its engine, takes an engine given
// twice (one per world of a check) once, and gives the same notes as
// findings of a report and as lines on standard error.
func TestEngineNotes(t *testing.T) {
	ky := &notingEngine{name: "Kyverno", notes: []string{"ClusterCleanupPolicy cleanup: refused", "p/r: failed"}}
	gk := &notingEngine{name: "Gatekeeper"}
	engines := []admission.PolicyEngine{ky, gk, ky}
	want := []string{"Kyverno: ClusterCleanupPolicy cleanup: refused", "Kyverno: p/r: failed"}
	var got []string
	for _, f := range engineFindings(engines) {
		if f.Source != "" {
			t.Errorf("finding %q has a source %q", f.Message, f.Source)
		}
		got = append(got, f.Message)
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings\ngot  %q\nwant %q", got, want)
	}
	var buf bytes.Buffer
	printEngineNotes(&buf, engines)
	if s := buf.String(); s != "note: "+want[0]+"\nnote: "+want[1]+"\n" {
		t.Errorf("printed %q", s)
	}
}
