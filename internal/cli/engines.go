package cli

import (
	"fmt"
	"io"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/gatekeeper"
	"github.com/truce-dev/truce/engine/kyverno"
	"github.com/truce-dev/truce/manifest"
	treport "github.com/truce-dev/truce/report"
)

// policyEngines returns the policy engines truce runs itself for a cluster
// and repository holding objs: each engine whose own objects appear among
// them, as the real engine is installed where its policies are (any of
// Kyverno's kinds, a PolicyException alone too, means Kyverno). Kyverno
// is one helper process per truce process (kyverno.Shared), started by the
// first chain that installs it.
func policyEngines(objs ...[]manifest.Object) ([]admission.PolicyEngine, error) {
	uses := func(owns func(gk k8sschema.GroupKind) bool) bool {
		for _, list := range objs {
			for _, o := range list {
				if o.Object != nil && owns(o.Object.GroupVersionKind().GroupKind()) {
					return true
				}
			}
		}
		return false
	}
	var engines []admission.PolicyEngine
	if uses(func(gk k8sschema.GroupKind) bool { return gatekeeper.Reads(gk.Group) }) {
		e, err := gatekeeper.New()
		if err != nil {
			return nil, err
		}
		engines = append(engines, e)
	}
	if uses(kyverno.IsKyvernoKind) {
		engines = append(engines, kyverno.Shared())
	}
	return engines, nil
}

// printEngineNotes writes the notes of the engines (admission.Noter) to w,
// each engine once: what they left out of the run, which the results alone
// do not show.
func printEngineNotes(w io.Writer, engines []admission.PolicyEngine) {
	for _, note := range engineNotes(engines) {
		fmt.Fprintf(w, "note: %s\n", note)
	}
}

// engineFindings are the engines' notes as findings of a report: a check
// run in CI keeps them with its results (JSON, SARIF, JUnit) instead of on
// standard error, where a policy the engine refused would go unseen.
func engineFindings(engines []admission.PolicyEngine) []treport.Finding {
	var out []treport.Finding
	for _, note := range engineNotes(engines) {
		out = append(out, treport.Finding{Message: note})
	}
	return out
}

// engineNotes are the notes of the engines, each engine once, named by it.
func engineNotes(engines []admission.PolicyEngine) []string {
	var out []string
	seen := map[admission.PolicyEngine]bool{}
	for _, e := range engines {
		n, ok := e.(admission.Noter)
		if !ok || seen[e] {
			continue
		}
		seen[e] = true
		for _, note := range n.Notes() {
			out = append(out, e.Name()+": "+note)
		}
	}
	return out
}
