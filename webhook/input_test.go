package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func mustObject(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestBadInput: every malformed request gets an HTTP error or a
// well-formed AdmissionReview, never a panic or a hang.
func TestBadInput(t *testing.T) {
	h, err := NewHandler(context.Background(), Options{
		PolicyPaths: []string{"../examples/image-mirror/cluster"}, MaxRequestBytes: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	good := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "2", 1)), "deployments")
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	request := func(m map[string]any) map[string]any { return m["request"].(map[string]any) }
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   []byte
		code   int
		want   string
	}{
		{name: "good", body: good, code: 200},
		{name: "GET", method: http.MethodGet, code: 405},
		{name: "too large", body: bytes.Repeat([]byte(" "), 65<<10), code: 413, want: "over 65536 bytes"},
		{name: "not JSON", body: []byte("{not json"), code: 400, want: "decoding the AdmissionReview"},
		{name: "empty body", body: nil, code: 400, want: "decoding the AdmissionReview"},
		{name: "trailing data", body: append(append([]byte{}, good...), []byte(`{}`)...), code: 400, want: "data after"},
		{name: "v1beta1", body: edit(func(m map[string]any) { m["apiVersion"] = "admission.k8s.io/v1beta1" }), code: 400, want: "want an admission.k8s.io/v1 AdmissionReview"},
		{name: "wrong kind", body: edit(func(m map[string]any) { m["kind"] = "ConfigMap" }), code: 400, want: "AdmissionReview"},
		{name: "no request", body: edit(func(m map[string]any) { delete(m, "request") }), code: 400, want: "no request"},
		{name: "no uid", body: edit(func(m map[string]any) { delete(request(m), "uid") }), code: 400, want: "no uid"},
		{name: "no object", body: edit(func(m map[string]any) { delete(request(m), "object") }), code: 400, want: "has no object"},
		{name: "null object", body: edit(func(m map[string]any) { request(m)["object"] = nil }), code: 400, want: "has no object"},
		{name: "update without oldObject", body: edit(func(m map[string]any) { request(m)["operation"] = "UPDATE" }), code: 400, want: "no oldObject"},
		{name: "unknown operation", body: edit(func(m map[string]any) { request(m)["operation"] = "PATCH" }), code: 400, want: "unknown operation"},
		{name: "namespace that is not a name", body: edit(func(m map[string]any) { request(m)["namespace"] = strings.Repeat("x/", 200) }), code: 400, want: "is not a namespace name"},
		{name: "no kind", body: edit(func(m map[string]any) { delete(request(m), "kind") }), code: 400, want: "no kind"},
		{name: "object of the wrong shape", body: edit(func(m map[string]any) {
			request(m)["object"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": "a string"}
		}), code: 400, want: "decoding object"},
		{name: "kind and object disagree", body: edit(func(m map[string]any) {
			request(m)["kind"] = map[string]any{"group": "example.com", "version": "v1", "kind": "Widget"}
			request(m)["resource"] = map[string]any{"group": "example.com", "version": "v1", "resource": "widgets"}
		}), code: 400, want: "the request says example.com/v1, Kind=Widget"},
		{name: "custom resource without its CRD", body: edit(func(m map[string]any) {
			request(m)["kind"] = map[string]any{"group": "example.com", "version": "v1", "kind": "Widget"}
			request(m)["resource"] = map[string]any{"group": "example.com", "version": "v1", "resource": "widgets"}
			request(m)["object"] = map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "shop"}, "spec": map[string]any{"size": 3}}
		}), code: 200, want: `"allowed":true`},
		{name: "built-in kind not served", body: edit(func(m map[string]any) {
			request(m)["kind"] = map[string]any{"group": "apps", "version": "v1beta1", "kind": "Deployment"}
		}), code: 500, want: "apps/v1beta1"},
		{name: "object is an array", body: edit(func(m map[string]any) { request(m)["object"] = []any{1, 2} }), code: 400, want: "decoding object"},
		{name: "kind is a bool", body: edit(func(m map[string]any) { request(m)["object"].(map[string]any)["kind"] = true }), code: 400, want: "decoding object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			path := tc.path
			if path == "" {
				path = "/mutate"
			}
			for _, p := range []string{path, "/validate"} {
				name := strings.TrimPrefix(p, "/")
				evaluation := testutil.ToFloat64(h.metrics.errors.WithLabelValues(name, "evaluation"))
				rec := httptest.NewRecorder()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				h.ServeHTTP(rec, httptest.NewRequest(method, p, bytes.NewReader(tc.body)).WithContext(ctx))
				cancel()
				if rec.Code != tc.code {
					t.Fatalf("%s: HTTP %d, want %d: %s", p, rec.Code, tc.code, rec.Body.String())
				}
				if !strings.Contains(rec.Body.String(), tc.want) {
					t.Fatalf("%s: body %q does not say %q", p, rec.Body.String(), tc.want)
				}
				// Only the server's own failures count as evaluation errors
				// (the 500s that page people); the sender's are bad requests.
				counted := testutil.ToFloat64(h.metrics.errors.WithLabelValues(name, "evaluation")) - evaluation
				if want := float64(0); tc.code == 500 {
					want = 1
					if counted != want {
						t.Fatalf("%s: %v evaluation errors counted, want %v", p, counted, want)
					}
				} else if counted != want {
					t.Fatalf("%s: HTTP %d counted as an evaluation error", p, tc.code)
				}
				if tc.code == 200 {
					var out map[string]any
					if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out["response"] == nil {
						t.Fatalf("%s: not an AdmissionReview: %s", p, rec.Body.String())
					}
				}
			}
		})
	}
}

// TestDeadline: the API server's ?timeout= shortens the deadline, leaving
// a quarter for the answer to travel; the configured timeout caps it.
func TestDeadline(t *testing.T) {
	h := &Handler{opts: Options{RequestTimeout: 1500 * time.Millisecond}}
	for _, tc := range []struct {
		query string
		want  time.Duration
	}{
		{"", 1500 * time.Millisecond},
		{"?timeout=2s", 1500 * time.Millisecond},
		{"?timeout=1s", 750 * time.Millisecond},
		{"?timeout=30s", 1500 * time.Millisecond},
		{"?timeout=garbage", 1500 * time.Millisecond},
		{"?timeout=-1s", 1500 * time.Millisecond},
	} {
		if got := h.deadline(httptest.NewRequest(http.MethodPost, "/validate"+tc.query, nil)); got != tc.want {
			t.Errorf("%q: deadline %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestAuditKeys(t *testing.T) {
	long := strings.Repeat("a", 80) + "/key"
	for _, tc := range []struct{ in, want string }{
		{"validation.policy.admission.k8s.io/validation_failure", "validation.policy.admission.k8s.io_validation_failure"},
		{"replicas", "replicas"},
	} {
		got := AuditAnnotationKey(tc.in)
		if got != tc.want || len(got) > qualifiedNameMaxLength || strings.Contains(got, "/") {
			t.Errorf("AuditAnnotationKey(%q) = %q", tc.in, got)
		}
	}
	if k := AuditAnnotationKey(long); len(k) > qualifiedNameMaxLength || strings.Contains(k, "/") || !strings.HasPrefix(k, "aaaa") {
		t.Errorf("AuditAnnotationKey(long) = %q, want a shortened qualified name", k)
	}
	if AuditAnnotationKey(long) == AuditAnnotationKey(strings.Repeat("a", 80)+"/other") {
		t.Error("shortened keys collide")
	}
}

func TestPolicyOf(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"ValidatingAdmissionPolicy 'replica-limit.example.com' with binding 'b' denied request: at most 5", "replica-limit.example.com"},
		{"policy 'm' with binding 'mb' denied request: expression failed", "m"},
		{"something else", "unknown"},
	} {
		if got := policyOf(tc.msg); got != tc.want {
			t.Errorf("policyOf(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestPatchHoldsOnlyThePoliciesChanges: fields truce's scheme does not know
// and defaults the server did not send stay out of the patch.
func TestPatchHoldsOnlyThePoliciesChanges(t *testing.T) {
	h := newTestHandler(t, []string{"../examples/image-mirror/cluster/image-mirror.yaml"}, nil)
	obj := mustObject(t, strings.Replace(deployment, "%d", "2", 1))
	if err := unstructured.SetNestedField(obj.Object, "from a newer server", "spec", "futureField"); err != nil {
		t.Fatal(err)
	}
	_, out := post(t, h, "/mutate", reviewFor(t, "CREATE", obj, "deployments"))
	if out == nil || !out.Response.Allowed || out.Response.Patch == nil {
		t.Fatalf("want a patch, got %+v", out)
	}
	var ops []map[string]any
	if err := json.Unmarshal(out.Response.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0]["op"] != "replace" || ops[0]["path"] != "/spec/template/spec/containers/0/image" ||
		ops[0]["value"] != "registry.internal/nginx:1.27" {
		t.Fatalf("patch %s, want only the image replaced", out.Response.Patch)
	}
}

// TestSubresourceReview: a policy on deployments/scale sees the Scale.
func TestSubresourceReview(t *testing.T) {
	dir := t.TempDir()
	policy := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: scale-limit}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments/scale]}
  validations:
  - expression: "object.spec.replicas <= 5"
    message: at most 5 replicas
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: scale-limit}
spec: {policyName: scale-limit, validationActions: [Deny]}
`
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, []string{dir}, nil)
	for _, tc := range []struct {
		replicas int
		allowed  bool
	}{{3, true}, {9, false}} {
		scale := fmt.Sprintf(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":%d},"status":{"replicas":2}}`, tc.replicas)
		body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"autoscaling","version":"v1","kind":"Scale"},
"resource":{"group":"apps","version":"v1","resource":"deployments"},"subResource":"scale","namespace":"shop","name":"web","operation":"UPDATE",
"userInfo":{"username":"hpa"},"object":%s,"oldObject":%s}}`, scale, scale)
		rec, out := post(t, h, "/validate", []byte(body))
		if out == nil {
			t.Fatalf("replicas %d: HTTP %d %s", tc.replicas, rec.Code, rec.Body)
		}
		if out.Response.Allowed != tc.allowed {
			t.Fatalf("replicas %d: allowed %v, want %v (%+v)", tc.replicas, out.Response.Allowed, tc.allowed, out.Response.Result)
		}
	}
}

// TestMaxInFlight: a request that finds every slot taken waits until its
// deadline and is answered 429, without reading its body; a freed slot
// serves the next one.
func TestMaxInFlight(t *testing.T) {
	h, err := NewHandler(context.Background(), Options{PolicyPaths: []string{"../examples/image-mirror/cluster"}, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	good := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "2", 1)), "deployments")

	// The first request holds the only slot while its body is still
	// arriving.
	pr, pw := io.Pipe()
	first := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", pr))
		first <- rec.Code
	}()
	waitFor(t, func() bool { return len(h.slots) == 1 })

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate?timeout=100ms", bytes.NewReader(good)))
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "1 requests in flight") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("with every slot taken: %d %q", rec.Code, rec.Body.String())
	}

	if _, err := pw.Write(good); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-first; code != http.StatusOK {
		t.Errorf("the first request: %d", code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(good)))
	if rec.Code != http.StatusOK {
		t.Errorf("after the slot was freed: %d %q", rec.Code, rec.Body.String())
	}
}

// stuckNamespaces blocks every lookup, ignoring its context, until open
// is closed: an evaluation that outlives its deadline.
type stuckNamespaces struct{ open chan struct{} }

func (s stuckNamespaces) Namespace(context.Context, string) (*corev1.Namespace, bool) {
	<-s.open
	return nil, false
}

// TestTimedOutEvaluationKeepsItsSlot: a request answered 504 whose
// evaluation goes on still counts against MaxInFlight until it ends.
func TestTimedOutEvaluationKeepsItsSlot(t *testing.T) {
	stuck := stuckNamespaces{open: make(chan struct{})}
	h, err := NewHandler(context.Background(), Options{PolicyPaths: []string{"../examples/image-mirror/cluster"},
		MaxInFlight: 1, RequestTimeout: 100 * time.Millisecond, Namespaces: stuck})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	good := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "2", 1)), "deployments")
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(good)))
		return rec
	}
	if rec := serve(); rec.Code != http.StatusGatewayTimeout {
		t.Fatalf("the stuck evaluation: %d %q", rec.Code, rec.Body.String())
	}
	if rec := serve(); rec.Code != http.StatusTooManyRequests {
		t.Errorf("while the timed-out evaluation runs: %d %q", rec.Code, rec.Body.String())
	}
	close(stuck.open)
	waitFor(t, func() bool { return len(h.slots) == 0 })
	if rec := serve(); rec.Code != http.StatusOK {
		t.Errorf("after it ended: %d %q", rec.Code, rec.Body.String())
	}
}
