package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gatekeeper objects of the repository that a cluster would not hold are
// not taken as installed before the sync: a mutator Gatekeeper's
// validating webhook refuses is Rejected at the sync, with its message,
// instead of failing the whole check; a constraint of a template
// Gatekeeper cannot ingest has no CRD, and says why.
func TestCheckRefusedGatekeeperObjects(t *testing.T) {
	const badAssign = `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: label-everything
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "metadata.labels.team"
  parameters:
    assign:
      value: shop
`
	const badTemplate = `apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sbroken
spec:
  crd:
    spec:
      names:
        kind: K8sBroken
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8sbroken
      violation[{"msg": msg}] {
        msg := "broken" +
      }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sBroken
metadata:
  name: broken
spec:
  match:
    kinds:
    - apiGroups: ["apps"]
      kinds: ["Deployment"]
`
	tests := []struct {
		name, file, manifest string
		key, verdict         string
		says                 []string
	}{{
		name: "a mutator Gatekeeper refuses", file: "assign.yaml", manifest: badAssign,
		key: "argocd shop Assign.mutations.gatekeeper.sh/label-everything", verdict: "Rejected",
		says: []string{`admission webhook "validation.gatekeeper.sh" denied the request: assign label-everything can't change metadata`},
	}, {
		name: "a constraint of a template Gatekeeper cannot ingest", file: "broken.yaml", manifest: badTemplate,
		key: "argocd shop K8sBroken.constraints.gatekeeper.sh/broken", verdict: "Unpredictable",
		says: []string{
			"no CRD for K8sBroken.constraints.gatekeeper.sh: Gatekeeper cannot ingest its ConstraintTemplate k8sbroken: ",
			"Gatekeeper: ConstraintTemplate k8sbroken cannot be ingested, so no CRD is created for K8sBroken",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyExample(t, "gatekeeper-assign")
			if err := os.WriteFile(filepath.Join(dir, "app", tt.file), []byte(tt.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			got, _ := checkJSON(t, dir)
			if got.verdicts[tt.key] != tt.verdict {
				t.Fatalf("%s: %q, want %s (verdicts %v)", tt.key, got.verdicts[tt.key], tt.verdict, got.verdicts)
			}
			out, _, _ := runTruce(t, "check", dir)
			for _, want := range tt.says {
				if !strings.Contains(out, want) {
					t.Errorf("check does not say %q:\n%s", want, out)
				}
			}
		})
	}
}
