package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/engine/kyverno"
)

// A Kyverno policy in the repository that Kyverno's own webhook
// (validate-policy.kyverno.svc, failing closed) refuses is not taken as
// installed: Argo CD's sync of it is refused with Kyverno's message, and
// the failed sync stops there (no prune: the generate loop of the example
// does not happen).
func TestCheckRefusedKyvernoPolicy(t *testing.T) {
	if _, err := kyverno.FindHelper(); err != nil {
		t.Skipf("Kyverno policies need the helper (make unit sets $%s): %v", kyverno.HelperEnv, err)
	}
	dir := copyExample(t, "kyverno-generate")
	const bad = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: two-checks
spec:
  rules:
  - name: r
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      message: no latest
      pattern:
        spec:
          containers:
          - image: "!*:latest"
      deny: {}
`
	if err := os.WriteFile(filepath.Join(dir, "app", "bad-policy.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	got, code := checkJSON(t, dir)
	if code != exitFound {
		t.Errorf("check exit %d, want %d", code, exitFound)
	}
	const key = "argocd shop ClusterPolicy.kyverno.io/two-checks"
	if got.verdicts[key] != "Rejected" {
		t.Fatalf("%s: %q, want Rejected (verdicts %v)", key, got.verdicts[key], got.verdicts)
	}
	if v, ok := got.verdicts["argocd shop Secret/team-a/registry-creds"]; ok {
		t.Errorf("Secret/team-a/registry-creds: %s: the failed sync prunes nothing", v)
	}
	out, _, _ := runTruce(t, "check", dir)
	for _, want := range []string{`admission webhook "validate-policy.kyverno.svc" denied the request`, "only one of pattern, anyPattern, deny, foreach, cel can be specified"} {
		if !strings.Contains(out, want) {
			t.Errorf("check does not say %q:\n%s", want, out)
		}
	}
}
