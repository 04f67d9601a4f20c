package lint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// application is an Argo CD Application, a kind whose CRD an input
// usually does not hold.
const application = `
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  destination: {server: https://kubernetes.default.svc, namespace: payments}
`

// TestPodSecurityAfterMutatingAdmission: PodSecurity judges the Pod that
// mutating admission leaves, as the API server runs it; a policy that
// fixes the template removes the finding, one that fixes part of it is
// named in the finding, and a policy matching other users changes
// nothing (the controller creates the Pods as its service account).
func TestPodSecurityAfterMutatingAdmission(t *testing.T) {
	dir := filepath.Join("testdata", "pod-security-rejects-workload-pods")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bad := read("bad.yaml")
	policy := func(file, match string) string {
		return strings.Replace(read(file), "expression: 'true'", "expression: '"+match+"'", 1)
	}
	for _, tc := range []struct {
		name   string
		policy string
		want   []string // substrings of the one finding; nil: no finding
	}{
		{name: "no policy", want: []string{`would be rejected: `, "allowPrivilegeEscalation", "seccompProfile"}},
		{name: "a policy fixes it", policy: policy("mutated/fixes-all.yaml", "true")},
		{name: "with its parameter, a custom resource of the input's CRD", policy: policy("mutated/fixes-all-params.yaml", "true")},
		{name: "with an Argo CD Application in the input (no CRD)", policy: policy("mutated/fixes-all.yaml", "true") + application},
		{name: "for the controller's service account", policy: policy("mutated/fixes-all.yaml", `request.userInfo.username == "system:serviceaccount:kube-system:replicaset-controller"`)},
		{name: "a policy fixes part of it", policy: policy("mutated/fixes-part.yaml", "true"),
			want: []string{"would be rejected (after MutatingAdmissionPolicy/restrict-pods.example.com", "allowPrivilegeEscalation"}},
		{name: "a policy for other users", policy: policy("mutated/fixes-all.yaml", `request.userInfo.username == "alice"`),
			want: []string{"would be rejected: ", "seccompProfile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := bad
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
