package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// admitWith admits obj with `truce admit`'s chain on the cluster at paths
// plus extra objects; nil when denied, with the message.
func admitWith(t *testing.T, paths []string, extra []*unstructured.Unstructured, opts admission.Options, obj string) (*unstructured.Unstructured, string) {
	t.Helper()
	ctx := context.Background()
	objs, err := manifest.LoadPaths(ctx, paths, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	us := extra
	for _, o := range objs {
		us = append(us, o.Object)
	}
	state, err := admission.NewState(us...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(ctx, state, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(obj), &u.Object); err != nil {
		t.Fatal(err)
	}
	res, err := chain.Admit(ctx, admission.Request{Object: u})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed {
		return nil, res.Message
	}
	return &unstructured.Unstructured{Object: res.Object}, ""
}

// webhookConfigurations point kube-apiserver (here: truce admit's chain)
// at a served Handler for the resource, with the safe defaults.
func webhookConfigurations(t *testing.T, url string, caPEM []byte, group, resource string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, c := range []struct{ kind, path, extra string }{
		{"MutatingWebhookConfiguration", "/mutate", "  failurePolicy: Ignore\n  reinvocationPolicy: IfNeeded\n"},
		{"ValidatingWebhookConfiguration", "/validate", "  failurePolicy: Fail\n"},
	} {
		doc := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: %s
metadata: {name: truce}
webhooks:
- name: truce.truce.dev
  clientConfig:
    url: %s%s
    caBundle: %s
  rules:
  - {apiGroups: [%q], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [%s]}
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 2
%s`, c.kind, url, c.path, base64.StdEncoding.EncodeToString(caPEM), group, resource, c.extra)
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func reviewFor(t *testing.T, op string, obj *unstructured.Unstructured, resource string) []byte {
	t.Helper()
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GroupVersionKind()
	dry := false
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("0f1c2d3e-0000-4000-8000-000000000001"),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
			Name:      obj.GetName(),
			Namespace: obj.GetNamespace(),
			Operation: admissionv1.Operation(op),
			UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
			Object:    runtime.RawExtension{Raw: raw},
			DryRun:    &dry,
		},
	}
	if op == "UPDATE" {
		r.Request.OldObject = runtime.RawExtension{Raw: raw}
	}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func newTestHandler(t *testing.T, policyPaths, clusterPaths []string) *Handler {
	t.Helper()
	h, err := NewHandler(context.Background(), Options{PolicyPaths: policyPaths, ClusterPaths: clusterPaths})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func post(t *testing.T, h http.Handler, path string, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v\n%s", err, rec.Body.String())
	}
	return rec, out
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx:1.27}
      - {name: log, image: registry.internal/fluent-bit:3}
`

// TestSameAnswerAsAdmit: a write admitted by `truce admit` with the
// example policies installed in the cluster, and by `truce admit` calling
// the Handler serving them as webhooks, gives the same stored object or
// the same denial; serving the stored object again yields no patch.
func TestSameAnswerAsAdmit(t *testing.T) {
	imageMirror := "../examples/image-mirror/cluster"
	for _, tc := range []struct {
		name      string
		policies  []string
		cluster   []string
		object    string
		group     string
		resource  string
		wantPatch bool
		wantDeny  string
	}{
		{name: "image mirror", policies: []string{imageMirror + "/image-mirror.yaml"}, cluster: []string{imageMirror + "/namespace.yaml"},
			object: strings.Replace(deployment, "%d", "2", 1), group: "apps", resource: "deployments", wantPatch: true},
		{name: "replica limit denies", policies: []string{imageMirror + "/replica-limit.yaml"}, cluster: []string{imageMirror + "/namespace.yaml"},
			object: strings.Replace(deployment, "%d", "9", 1), group: "apps", resource: "deployments", wantDeny: "at most 5 replicas"},
		{name: "replica limit allows", policies: []string{imageMirror + "/replica-limit.yaml"}, cluster: []string{imageMirror + "/namespace.yaml"},
			object: strings.Replace(deployment, "%d", "3", 1), group: "apps", resource: "deployments"},
		{name: "label mutation", policies: []string{"../examples/label-mutation/policy.yaml"}, cluster: []string{imageMirror + "/namespace.yaml"},
			object: strings.Replace(deployment, "%d", "1", 1), group: "apps", resource: "deployments", wantPatch: true},
		{name: "sidecar injection", policies: []string{"../examples/sidecar-injection/policy.yaml"},
			object: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers:\n  - {name: app, image: nginx:1.27}\n",
			group:  "", resource: "pods", wantPatch: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandler(t, tc.policies, tc.cluster)
			srv := httptest.NewTLSServer(h)
			defer srv.Close()
			caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

			inTree, inTreeMsg := admitWith(t, append(append([]string{}, tc.cluster...), tc.policies...), nil, admission.Options{}, tc.object)
			served, servedMsg := admitWith(t, tc.cluster, webhookConfigurations(t, srv.URL, caPEM, tc.group, tc.resource),
				admission.Options{CallURLWebhooks: true}, tc.object)
			if tc.wantDeny != "" {
				if inTree != nil || served != nil {
					t.Fatalf("want a denial, in-tree allowed=%v, webhook allowed=%v", inTree != nil, served != nil)
				}
				want := `admission webhook "truce.truce.dev" denied the request: ` + inTreeMsg
				if servedMsg != want || !strings.Contains(servedMsg, tc.wantDeny) {
					t.Fatalf("denial differs:\n webhook: %s\n want:    %s", servedMsg, want)
				}
				return
			}
			if inTree == nil || served == nil {
				t.Fatalf("denied: in-tree %q, webhook %q", inTreeMsg, servedMsg)
			}
			for _, u := range []*unstructured.Unstructured{inTree, served} {
				unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
				unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
				unstructured.RemoveNestedField(u.Object, "metadata", "uid")
				unstructured.RemoveNestedField(u.Object, "metadata", "generateName")
			}
			if !equalJSON(served.Object, inTree.Object) {
				a, _ := yaml.Marshal(served.Object)
				b, _ := yaml.Marshal(inTree.Object)
				t.Fatalf("stored objects differ:\n--- through the webhook\n%s\n--- policies in-tree\n%s", a, b)
			}
			_, again := post(t, h, "/mutate", reviewFor(t, "CREATE", served, tc.resource))
			if again == nil || !again.Response.Allowed || again.Response.Patch != nil {
				t.Fatalf("serving the stored object again must yield no patch, got %+v", again.Response)
			}
			if again.Response.UID != "0f1c2d3e-0000-4000-8000-000000000001" || again.APIVersion != "admission.k8s.io/v1" || again.Kind != "AdmissionReview" {
				t.Fatalf("answer does not echo the review: %s %s uid %q", again.APIVersion, again.Kind, again.Response.UID)
			}
		})
	}
}

// equalJSON compares objects, ignoring the random suffix of the service
// account token volume.
func equalJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(tokenVolume.ReplaceAll(x, []byte("kube-api-access")), tokenVolume.ReplaceAll(y, []byte("kube-api-access")))
}

var tokenVolume = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)

func TestRefusesPolicySetsItCannotServe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, content, want string
	}{
		{"not idempotent", `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: append-sidecar}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/spec/containers/-", value: Object.spec.containers{name: "proxy", image: "envoy"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: append-sidecar}
spec: {policyName: append-sidecar}
`, "not idempotent"},
		{"no policies", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n", "no MutatingAdmissionPolicy or ValidatingAdmissionPolicy"},
		{"broken CEL", `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, "
`, "broken"},
		{"bad YAML", "apiVersion: v1\nkind: [\n", ".yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.content)
			_, err := NewHandler(context.Background(), Options{PolicyPaths: []string{p}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
