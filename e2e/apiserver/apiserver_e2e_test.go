//go:build e2e

package apiserver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stop kube-apiserver:", err)
	}
	os.Exit(code)
}

func shared(t *testing.T) *Server {
	t.Helper()
	start := time.Now()
	s, err := Shared(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shared server after %s: %s (dir %s)", time.Since(start).Round(time.Millisecond), s.StartupReport(), s.Dir())
	return s
}

func objects(t *testing.T, y string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(y, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// TestMutatingAdmissionPolicyV1Served: MutatingAdmissionPolicy is GA (and on
// by default) in this release, so no feature gate or runtime-config is set.
func TestMutatingAdmissionPolicyV1Served(t *testing.T) {
	s := shared(t)
	list, err := s.Clientset().Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range list.APIResources {
		have[r.Name] = true
	}
	for _, r := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings", "validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		if !have[r] {
			t.Errorf("admissionregistration.k8s.io/v1 does not serve %s", r)
		}
	}
}

// TestKubeconfig: the written kubeconfig reaches the server as the admin.
func TestKubeconfig(t *testing.T) {
	s := shared(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		if _, err := c.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if review.Status.UserInfo.Username != AdminUser {
		t.Errorf("kubeconfig user is %q, want %q", review.Status.UserInfo.Username, AdminUser)
	}
}

// TestApplyDryRunCleanup walks the whole helper API once: Apply, sync, a
// denied and an admitted dry run (with impersonation, warnings, audit
// annotations), Cleanup, and the policy being gone afterwards.
func TestApplyDryRunCleanup(t *testing.T) {
	s := shared(t)
	ctx := context.Background()
	err := s.Apply(ctx, objects(t, `apiVersion: v1
kind: Namespace
metadata: {name: harness-test}
---
apiVersion: v1
kind: Namespace
metadata:
  name: default
  labels: {added-by-case: "yes"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: stuck
  namespace: harness-test
  finalizers: [example.com/never-removed]
---
apiVersion: v1
kind: Secret
metadata: {name: in-default, namespace: default}
stringData: {k: v}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-forbidden}
spec:
  policyName: no-forbidden
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-forbidden}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "!has(object.data) || !('forbidden' in object.data)"
    messageExpression: "'no forbidden key for ' + request.userInfo.username"
  - expression: "!has(object.data) || !('warn' in object.data)"
    message: "warned"
  auditAnnotations:
  - {key: seen, valueExpression: "string(object.metadata.name)"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: warn}
spec:
  policyName: no-forbidden
  validationActions: [Warn]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: harness-test}}
`)...)
	if err != nil {
		t.Fatal(err)
	}
	syncStart := time.Now()
	if err := s.WaitForAdmissionSync(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("admission sync took %s", time.Since(syncStart).Round(time.Millisecond))

	cm := objects(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: harness-test}
data: {forbidden: "x"}`)[0]
	res, err := s.DryRunCreate(ctx, cm, "bob", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed() {
		t.Fatalf("forbidden key admitted: %+v", res.Object)
	}
	if got := res.Status.ErrStatus; got.Code != 422 || !strings.Contains(got.Message, "no forbidden key for bob") {
		t.Errorf("denial: %d %s %q", got.Code, got.Reason, got.Message)
	}
	ann, err := s.AuditAnnotations(ctx, res.AuditID)
	if err != nil {
		t.Fatal(err)
	}
	if ann["no-forbidden/seen"] != "cm" {
		t.Errorf("audit annotations: %v", ann)
	}

	cm.Object["data"] = map[string]any{"warn": "x"}
	res, err = s.DryRunCreate(ctx, cm, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Deny binding sees the same failing "warn" validation.
	if res.Allowed() {
		t.Fatalf("warn key admitted despite the Deny binding")
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "warned") {
		t.Errorf("warnings: %q", res.Warnings)
	}

	if err := s.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clientset().CoreV1().Namespaces().Get(ctx, "harness-test", metav1.GetOptions{}); err == nil {
		t.Error("namespace harness-test survived Cleanup")
	}
	def, err := s.Clientset().CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := def.Labels["added-by-case"]; ok {
		t.Errorf("label on namespace default not restored: %v", def.Labels)
	}
	if _, err := s.Clientset().CoreV1().Secrets("default").Get(ctx, "in-default", metav1.GetOptions{}); err == nil {
		t.Error("secret default/in-default survived Cleanup")
	}
	// The namespace can be created again at once (it is really gone, not
	// Terminating).
	if err := s.Apply(ctx, objects(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: harness-test}")...); err != nil {
		t.Fatal(err)
	}
	if err := s.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	cm.SetNamespace("default")
	res, err = s.DryRunCreate(ctx, cm, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed() || len(res.Warnings) != 0 {
		t.Errorf("after Cleanup: allowed=%v warnings=%q status=%v", res.Allowed(), res.Warnings, res.Status)
	}
}
