package lint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// restrictPods is a MutatingAdmissionPolicy that makes Pods meet
// "restricted" (pod: runAsNonRoot, seccomp; containers: no privilege
// escalation, no capabilities), bound for the users in MATCH.
const restrictPods = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: restrict-pods.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - name: who
    expression: 'MATCH'
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{
          securityContext: Object.spec.securityContext{runAsNonRoot: true,
            seccompProfile: Object.spec.securityContext.seccompProfile{type: "RuntimeDefault"}}}}
CONTAINERS---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: restrict-pods-binding.example.com}
spec:
  policyName: restrict-pods.example.com
`

// containersRestricted is a second mutation for the first container (a
// JSON patch: capabilities.drop is an atomic list, which an
// ApplyConfiguration may not set).
const containersRestricted = `  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/spec/containers/0/securityContext",
          value: Object.spec.containers.securityContext{allowPrivilegeEscalation: false,
            capabilities: Object.spec.containers.securityContext.capabilities{drop: ["ALL"]}}}]
`

// TestPodSecurityAfterMutatingAdmission: PodSecurity judges the Pod that
// mutating admission leaves, as the API server runs it; a policy that
// fixes the template removes the finding, one that fixes part of it is
// named in the finding, and a policy matching other users changes
// nothing (the controller creates the Pods as its service account).
func TestPodSecurityAfterMutatingAdmission(t *testing.T) {
	bad, err := os.ReadFile(filepath.Join("testdata", "pod-security-rejects-workload-pods", "bad.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := func(match, containers string) string {
		return strings.NewReplacer("MATCH", match, "CONTAINERS", containers).Replace(restrictPods)
	}
	for _, tc := range []struct {
		name   string
		policy string
		want   []string // substrings of the one finding; nil: no finding
	}{
		{name: "no policy", want: []string{`would be rejected: `, "allowPrivilegeEscalation", "seccompProfile"}},
		{name: "a policy fixes it", policy: policy("true", containersRestricted)},
		{name: "for the controller's service account", policy: policy(`request.userInfo.username == "system:serviceaccount:kube-system:replicaset-controller"`, containersRestricted)},
		{name: "a policy fixes part of it", policy: policy("true", ""),
			want: []string{"would be rejected (after MutatingAdmissionPolicy/restrict-pods.example.com", "allowPrivilegeEscalation"}},
		{name: "a policy for other users", policy: policy(`request.userInfo.username == "alice"`, containersRestricted),
			want: []string{"would be rejected: ", "seccompProfile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := string(bad)
			if tc.policy != "" {
				docs += "\n---\n" + tc.policy
			}
			objs, err := manifest.Decode("in.yaml", strings.NewReader(docs), manifest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := checkPodSecurity(context.Background(), &Input{Objects: objs})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("want no finding, got %+v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one finding, got %+v", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0].Message, w) {
					t.Errorf("finding %q does not contain %q", got[0].Message, w)
				}
			}
			if tc.name == "a policy fixes part of it" && strings.Contains(got[0].Message, "seccompProfile") {
				t.Errorf("the policy set the seccomp profile, yet: %s", got[0].Message)
			}
		})
	}
}
