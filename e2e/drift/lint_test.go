//go:build e2e

package drift

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/internal/cli"
)

// TestLintPodSecurityWithParameters: pod-security-rejects-workload-pods
// runs the input's MutatingAdmissionPolicies on a workload's Pod with the
// cluster the input describes, the CRD and the custom resource the policy
// reads its parameter from included. kube-apiserver, given the same
// objects, admits that Pod (PodSecurity "restricted" after the policy),
// so lint reports nothing.
func TestLintPodSecurityWithParameters(t *testing.T) {
	s := server(t)
	ctx := t.Context()
	examples := filepath.Join("..", "..", "lint", "testdata", "pod-security-rejects-workload-pods")
	bad, policy := filepath.Join(examples, "bad.yaml"), filepath.Join(examples, "mutated", "fixes-all-params.yaml")

	var out, errOut bytes.Buffer
	code := cli.Execute(ctx, []string{"lint", bad, policy, "--format", "json", "--fail-on", "none"}, strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("truce lint: exit %d: %s", code, errOut.String())
	}
	var report struct {
		Findings []struct{ Rule, Message string }
	}
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, f := range report.Findings {
		if f.Rule == "pod-security-rejects-workload-pods" {
			t.Errorf("lint: %s", f.Message)
		}
	}

	var docs []*unstructured.Unstructured
	var deployment *unstructured.Unstructured
	for _, file := range []string{bad, policy} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range splitDocs(string(data)) {
			u := parse(t, doc)
			if u.GetKind() == "Deployment" {
				deployment = u
				continue
			}
			docs = append(docs, u)
		}
	}
	if err := s.Apply(ctx, docs...); err != nil {
		t.Fatal(err)
	}
	// The Pod the Deployment's ReplicaSet creates.
	tmpl, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template")
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": tmpl["metadata"], "spec": tmpl["spec"]}}
	pod.SetNamespace(deployment.GetNamespace())
	pod.SetName(deployment.GetName() + "-7d4b9c6f8-x2x9q")
	lc := newLiveCluster(t, s)
	waitForAdmission(ctx, t, s, lc, nil, pod, admissionProbe{want: `
spec: {securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}}`})
}
