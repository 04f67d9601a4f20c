package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value is every percentile", ms(7), 50, 7 * time.Millisecond},
		{"one value p99", ms(7), 99, 7 * time.Millisecond},
		{"median of two is the lower", ms(1, 2), 50, 1 * time.Millisecond},
		{"median of four", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"median of five", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p90 of 1..100", ms(hundred...), 90, 90 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of ten is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"tiny p is the minimum", ms(hundred...), 0.001, 1 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://127.0.0.1:8443", true},
		{"https://[::1]:8443", true},
		{"https://localhost:8443", true},
		{"http://127.0.0.1:8080", true},
		{"https://example.com", false},
		{"https://10.0.0.1:443", false},
		{"https://0.0.0.0:8443", false},
		{"https://[::]:8443", false},
		{"https://localhost.example.com", false},
		{"https://127.0.0.1.nip.io", false},
		{"ftp://127.0.0.1", false},
		{"127.0.0.1:8443", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := loopbackURL(tc.url)
			if (err == nil) != tc.ok {
				t.Fatalf("loopbackURL(%q) error = %v, want ok %t", tc.url, err, tc.ok)
			}
		})
	}

	// Run refuses before it sends anything.
	_, err := Run(context.Background(), Config{
		Client: http.DefaultClient, URL: "https://example.com", Bodies: tinyBodies(),
		Concurrency: 1, Requests: 1,
	})
	if err == nil || !strings.Contains(err.Error(), "not on loopback") {
		t.Fatalf("Run against example.com: error %v, want a refusal", err)
	}
}

// tinyBodies are two hand-written reviews: a mutating one and a
// validating one that expects a denial.
func tinyBodies() []Request {
	review := func(obj string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":%q,`+
			`"kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},`+
			`"namespace":"default","operation":"CREATE","userInfo":{"username":"tester"},"object":%s}}`, UIDPlaceholder, obj)
	}
	allowed, denied := true, false
	return []Request{
		{Name: "mutate cm", Path: "/mutate", Mutating: true, ExpectAllowed: &allowed,
			Body: review(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)},
		{Name: "validate cm", Path: "/validate", ExpectAllowed: &denied,
			Body: review(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"default"}}`)},
	}
}

// answer is a handler that decodes the review and answers with what
// respond makes of it.
func answer(respond func(r *http.Request, req *admissionv1.AdmissionRequest) (int, any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(data, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("bad review: %v", err), http.StatusBadRequest)
			return
		}
		code, out := respond(r, review.Request)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if s, ok := out.(string); ok {
			_, _ = io.WriteString(w, s)
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}

func reviewOf(resp *admissionv1.AdmissionResponse) admissionv1.AdmissionReview {
	return admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	}
}

// correct answers both tiny bodies as expected: allowed on /mutate with a
// patch that applies, denied on /validate.
func correct(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if r.URL.Path == "/validate" {
		return &admissionv1.AdmissionResponse{UID: req.UID, Result: &metav1.Status{Message: "no"}}
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, PatchType: &pt,
		Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`)}
}

func TestRunCountsErrors(t *testing.T) {
	jsonPatch := admissionv1.PatchTypeJSONPatch
	for _, tc := range []struct {
		name    string
		handler http.Handler
		// check is Config.CheckAllowed.
		check bool
		// errors is how many of the 10 requests (5 of each body) fail.
		errors int
		want   string
	}{
		{"correct answers", answer(func(r *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusOK, reviewOf(correct(r, req))
		}), true, 0, ""},
		{"HTTP 500", answer(func(*http.Request, *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusInternalServerError, "boom"
		}), false, 10, "HTTP 500: boom"},
		{"wrong uid", answer(func(r *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			resp := correct(r, req)
			resp.UID = "f0f0f0f0-0000-4000-8000-000000000000"
			return http.StatusOK, reviewOf(resp)
		}), false, 10, "expected response.uid="},
		{"placeholder uid echoed from a cache", answer(func(r *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			resp := correct(r, req)
			resp.UID = UIDPlaceholder
			return http.StatusOK, reviewOf(resp)
		}), false, 10, "expected response.uid="},
		{"wrong kind", answer(func(r *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			out := reviewOf(correct(r, req))
			out.APIVersion = "admission.k8s.io/v1beta1"
			return http.StatusOK, out
		}), false, 10, "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview"},
		{"no response", answer(func(*http.Request, *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusOK, reviewOf(nil)
		}), false, 10, "webhook response was absent"},
		{"not JSON", answer(func(*http.Request, *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusOK, "<html>"
		}), false, 10, "not an AdmissionReview"},
		{"validating webhook patches", answer(func(_ *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusOK, reviewOf(&admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, PatchType: &jsonPatch,
				Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`)})
		}), false, 5, "validating webhook may not return response.patch"},
		{"patch does not apply", answer(func(_ *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			if req.Object.Raw != nil && strings.Contains(string(req.Object.Raw), `"name":"b"`) {
				return http.StatusOK, reviewOf(&admissionv1.AdmissionResponse{UID: req.UID})
			}
			return http.StatusOK, reviewOf(&admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, PatchType: &jsonPatch,
				Patch: []byte(`[{"op":"replace","path":"/spec/missing","value":1}]`)})
		}), true, 5, "the patch does not apply"},
		{"patch without type", answer(func(r *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			resp := correct(r, req)
			resp.PatchType = nil
			return http.StatusOK, reviewOf(resp)
		}), true, 5, "returned response.patch but not response.patchType"},
		{"unexpected answer is an error when checked", answer(func(_ *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusOK, reviewOf(&admissionv1.AdmissionResponse{UID: req.UID, Allowed: true})
		}), true, 5, "validate cm: allowed is true, want false"},
		{"unexpected answer is not checked unless asked", answer(func(_ *http.Request, req *admissionv1.AdmissionRequest) (int, any) {
			return http.StatusOK, reviewOf(&admissionv1.AdmissionResponse{UID: req.UID, Allowed: true})
		}), false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Serve(tc.handler, ServeOptions{Concurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.Close(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			res, err := Run(context.Background(), Config{
				Client: srv.Client, URL: srv.URL, Bodies: tinyBodies(),
				Concurrency: 2, Requests: 8, Warmup: 2, CheckAllowed: tc.check,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != tc.errors {
				t.Fatalf("Errors = %d, want %d (%q)", res.Errors, tc.errors, res.ErrorMessages)
			}
			if want := min(tc.errors, maxErrorMessages); len(res.ErrorMessages) != want {
				t.Errorf("%d error messages kept, want %d", len(res.ErrorMessages), want)
			}
			for _, m := range res.ErrorMessages {
				if !strings.Contains(m, tc.want) {
					t.Errorf("error %q does not say %q", m, tc.want)
				}
			}
			if res.Requests != 8 {
				t.Errorf("Requests = %d, want 8", res.Requests)
			}
		})
	}
}

func TestRunNoop(t *testing.T) {
	ctx := context.Background()
	bodies, err := Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		http1    bool
		protocol string
	}{
		{"HTTP/2 like kube-apiserver", false, "HTTP/2.0 over TLS 1.3"},
		{"HTTP/1.1", true, "HTTP/1.1 over TLS 1.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Serve(NoopHandler(), ServeOptions{Concurrency: 4, HTTP1: tc.http1})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.Close(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			res, err := Run(ctx, Config{
				Client: srv.Client, URL: srv.URL, Bodies: bodies,
				Concurrency: 4, Requests: 200, Warmup: 20,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 {
				t.Fatalf("%d errors: %q", res.Errors, res.ErrorMessages)
			}
			if res.Requests != 200 || res.Allowed != 200 || res.Denied != 0 || res.Patched != 0 {
				t.Errorf("requests %d, allowed %d, denied %d, patched %d; want 200 allowed", res.Requests, res.Allowed, res.Denied, res.Patched)
			}
			if res.Protocol != tc.protocol {
				t.Errorf("protocol %q, want %q", res.Protocol, tc.protocol)
			}
			if !(res.P50 > 0 && res.P50 <= res.P90 && res.P90 <= res.P99 && res.P99 <= res.Max) {
				t.Errorf("percentiles out of order: p50 %v p90 %v p99 %v max %v", res.P50, res.P90, res.P99, res.Max)
			}
			if res.Duration <= 0 || res.Throughput <= 0 {
				t.Errorf("duration %v, throughput %v", res.Duration, res.Throughput)
			}

			// The floor allows everything, so the corpus's expected
			// denials are errors when checked.
			checked, err := Run(ctx, Config{
				Client: srv.Client, URL: srv.URL, Bodies: bodies,
				Concurrency: 4, Requests: len(bodies), CheckAllowed: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if checked.Errors != 3 {
				t.Errorf("checked floor: %d errors, want the 3 expected denials (%q)", checked.Errors, checked.ErrorMessages)
			}
		})
	}
}

func TestNoopHandlerRefuses(t *testing.T) {
	srv, err := Serve(NoopHandler(), ServeOptions{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	for _, tc := range []struct {
		name, method, body string
		code               int
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"not JSON", http.MethodPost, "nope", http.StatusBadRequest},
		{"no request", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+"/validate", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, tc.code)
			}
		})
	}
}

func TestRunConfig(t *testing.T) {
	srv, err := Serve(NoopHandler(), ServeOptions{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	good := Config{Client: srv.Client, URL: srv.URL, Bodies: tinyBodies(), Concurrency: 1, Requests: 1}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		edit func(*Config)
		want string
	}{
		{"no client", context.Background(), func(c *Config) { c.Client = nil }, "no HTTP client"},
		{"no concurrency", context.Background(), func(c *Config) { c.Concurrency = 0 }, "concurrency"},
		{"no requests", context.Background(), func(c *Config) { c.Requests = 0 }, "at least 1 request"},
		{"no bodies", context.Background(), func(c *Config) { c.Bodies = nil }, "no request bodies"},
		{"no placeholder", context.Background(), func(c *Config) {
			c.Bodies = []Request{{Name: "x", Body: []byte(`{}`)}}
		}, "placeholder 0 times"},
		{"placeholder twice", context.Background(), func(c *Config) {
			c.Bodies = []Request{{Name: "x", Body: []byte(UIDPlaceholder + UIDPlaceholder)}}
		}, "placeholder 2 times"},
		{"cancelled", cancelled, func(*Config) {}, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			res, err := Run(tc.ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: result %+v, error %v; want an error saying %q", res, err, tc.want)
			}
		})
	}
	if _, err := Run(cancelled, good); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled run's error %v does not wrap context.Canceled", err)
	}
}
