package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
		{name: "no kind", body: edit(func(m map[string]any) { delete(request(m), "kind") }), code: 400, want: "no kind"},
		{name: "object of the wrong shape", body: edit(func(m map[string]any) {
			request(m)["object"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": "a string"}
		}), code: 500, want: "decoding object"},
		{name: "kind and object disagree", body: edit(func(m map[string]any) {
			request(m)["kind"] = map[string]any{"group": "example.com", "version": "v1", "kind": "Widget"}
			request(m)["resource"] = map[string]any{"group": "example.com", "version": "v1", "resource": "widgets"}
		}), code: 500, want: "the request says example.com/v1, Kind=Widget"},
		{name: "custom resource without its CRD", body: edit(func(m map[string]any) {
			request(m)["kind"] = map[string]any{"group": "example.com", "version": "v1", "kind": "Widget"}
			request(m)["resource"] = map[string]any{"group": "example.com", "version": "v1", "resource": "widgets"}
			request(m)["object"] = map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "shop"}, "spec": map[string]any{"size": 3}}
		}), code: 200, want: `"allowed":true`},
		{name: "built-in kind not served", body: edit(func(m map[string]any) {
			request(m)["kind"] = map[string]any{"group": "apps", "version": "v1beta1", "kind": "Deployment"}
		}), code: 500, want: "apps/v1beta1"},
		{name: "object is an array", body: edit(func(m map[string]any) { request(m)["object"] = []any{1, 2} }), code: 500, want: "decoding object"},
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
		{long, AuditAnnotationKey(long)},
	} {
		got := AuditAnnotationKey(tc.in)
		if got != tc.want || len(got) > qualifiedNameMaxLength || strings.Contains(got, "/") {
			t.Errorf("AuditAnnotationKey(%q) = %q", tc.in, got)
		}
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
