package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAdmitInOrderMatchesOneAtATime runs truce admit of the same writes
// one at a time and through admission.AdmitInOrder on several goroutines,
// for each verb that batches, and compares the whole output: every
// result, in order. The writes are the benchmark's (Deployments mutated
// and validated by policies, ConfigMaps, Services), each object written
// twice (the second an update), with a namespace and a policy written in
// between (admission reconfigured mid-run).
func TestAdmitInOrderMatchesOneAtATime(t *testing.T) {
	dir := benchRepo(t, 60)
	objects := filepath.Join(dir, "objects.yaml")
	data, err := os.ReadFile(objects)
	if err != nil {
		t.Fatal(err)
	}
	// The same objects again, the ConfigMaps' values and the Deployments'
	// replicas changed: updates.
	again := filepath.Join(dir, "again.yaml")
	changed := strings.NewReplacer("value-", "again-", "replicas: 2", "replicas: 3").Replace(string(data))
	if err := os.WriteFile(again, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	between := filepath.Join(dir, "between.yaml")
	err = os.WriteFile(between, []byte(`apiVersion: v1
kind: Namespace
metadata: {name: bench, labels: {env: prod}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: small-configs}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
  validations:
  - expression: "object.data.key != 'again-7'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: small-configs}
spec: {policyName: small-configs, validationActions: [Deny]}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	generated := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	run := func(t *testing.T, workers int, args ...string) string {
		t.Helper()
		saved := admitWorkers
		admitWorkers = workers
		defer func() { admitWorkers = saved }()
		out, errOut, code := runTruce(t, append([]string{"admit", "-f", objects, "-f", between, "-f", again,
			"-c", filepath.Join(dir, "policies.yaml"), "-o", "json"}, args...)...)
		if code != exitFound {
			t.Fatalf("exit %d (want %d: again-7 is denied): %s", code, exitFound, errOut)
		}
		return generated.ReplaceAllString(out, "GENERATED")
	}
	for _, verb := range [][]string{nil, {"--server-side"}, {"--replace"}} {
		t.Run(fmt.Sprint(verb), func(t *testing.T) {
			want := run(t, 1, verb...)
			got := run(t, 4, verb...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("admitted in order on 4 goroutines differs from one at a time (-one +in order):\n%s", diff)
			}
		})
	}
}
