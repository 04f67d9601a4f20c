//go:build e2e

package differential

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/e2e/apiserver"
)

// TestLintPodSecurityAfterMutation: pod-security-rejects-workload-pods
// judges the Pod the Deployment's controller creates after the input's
// MutatingAdmissionPolicies, as kube-apiserver's PodSecurity plugin does.
// The judge is a dry-run create of that Pod, as the replicaset
// controller's service account, in the namespace enforcing "restricted"
// with the policy applied: the server admits it exactly when lint reports
// nothing.
func TestLintPodSecurityAfterMutation(t *testing.T) {
	if *flagServerOnly {
		t.Skip("needs truce")
	}
	start := time.Now()
	ctx := context.Background()
	bin := truceBinary(t)
	srv, err := apiserver.Shared(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	examples := filepath.Join("..", "..", "lint", "testdata", "pod-security-rejects-workload-pods")
	bad := filepath.Join(examples, "bad.yaml")
	docs, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	workload := parseLintDocs(t, string(docs))
	var namespace, deployment *unstructured.Unstructured
	for _, o := range workload {
		switch o.GetKind() {
		case "Namespace":
			namespace = o
		case "Deployment":
			deployment = o
		}
	}
	tmpl, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template")
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": tmpl["metadata"], "spec": tmpl["spec"]}}
	pod.SetNamespace(deployment.GetNamespace())
	pod.SetName(deployment.GetName() + "-7d4b9c6f8-x2x9q")
	controller := "system:serviceaccount:kube-system:replicaset-controller"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}

	for _, tc := range []struct {
		policy   string
		rejected bool
	}{
		{policy: "fixes-all.yaml", rejected: false},
		{policy: "fixes-part.yaml", rejected: true},
	} {
		t.Run(strings.TrimSuffix(tc.policy, ".yaml"), func(t *testing.T) {
			useCleanServer(ctx, t, srv)
			policyFile := filepath.Join(examples, "mutated", tc.policy)
			findings := findingsFor(runLint(ctx, t, bin, bad, policyFile), "pod-security-rejects-workload-pods",
				"Deployment "+deployment.GetNamespace()+"/"+deployment.GetName())
			if lintRejects := len(findings) > 0; lintRejects != tc.rejected {
				t.Fatalf("lint: rejected=%v, want %v: %+v", lintRejects, tc.rejected, findings)
			}

			policyDocs, err := os.ReadFile(policyFile)
			if err != nil {
				t.Fatal(err)
			}
			objs := append([]*unstructured.Unstructured{namespace.DeepCopy()}, parseLintDocs(t, string(policyDocs))...)
			if err := srv.Apply(ctx, objs...); err != nil {
				t.Fatal(err)
			}
			if err := srv.WaitForAdmissionSync(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := srv.DryRunCreate(ctx, pod.DeepCopy(), controller, groups)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed() == tc.rejected {
				t.Fatalf("kube-apiserver: allowed=%v, but lint says rejected=%v (%+v); status %v", res.Allowed(), tc.rejected, findings, res.Status)
			}
			if tc.rejected {
				_, detail, ok := strings.Cut(res.Status.Error(), `violates PodSecurity "restricted:latest": `)
				if !ok {
					t.Fatalf("rejected, but not by PodSecurity: %v", res.Status)
				}
				// The same checks fail, in the server's words.
				if !strings.HasSuffix(findings[0].Message, "): "+detail) {
					t.Errorf("lint names other violations than kube-apiserver:\nlint:   %s\nserver: %s", findings[0].Message, detail)
				}
				for _, f := range findings {
					t.Logf("lint: %s", f.Message)
				}
				t.Logf("kube-apiserver: %s", res.Status.Error())
			}
		})
	}
	t.Logf("timing: TestLintPodSecurityAfterMutation %s", time.Since(start).Round(time.Millisecond))
}
