package admission_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/truce-dev/truce/admission"
)

// ---------------------------------------------------------------------------
// A TLS webhook server on loopback, serving "webhook.wh-system.svc" and
// 127.0.0.1 with a certificate from a CA generated here.

const (
	webhookService   = "webhook"
	webhookNamespace = "wh-system"
)

type testCA struct {
	caPEM []byte
	cert  tls.Certificate
}

func newTestCA(t testing.TB, caName string, dnsNames []string, ips []net.IP) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTemplate, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert: cert}
}

// reviewFunc answers one AdmissionRequest.
type reviewFunc func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// webhookServer serves one reviewFunc per path and records every review.
type webhookServer struct {
	*httptest.Server
	mu      sync.Mutex
	reviews map[string][]admissionv1.AdmissionReview
}

func newWebhookServer(t testing.TB, ca testCA, handlers map[string]reviewFunc) *webhookServer {
	t.Helper()
	ws := &webhookServer{reviews: map[string][]admissionv1.AdmissionReview{}}
	mux := http.NewServeMux()
	for path, h := range handlers {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
				http.Error(w, "bad review", http.StatusBadRequest)
				return
			}
			ws.mu.Lock()
			ws.reviews[path] = append(ws.reviews[path], review)
			ws.mu.Unlock()
			resp := h(review.Request)
			resp.UID = review.Request.UID
			out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
		})
	}
	// NewUnstartedServer listens on loopback (127.0.0.1:0).
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ws.Server = srv
	return ws
}

// calls returns the reviews a path received so far.
func (ws *webhookServer) calls(path string) []admissionv1.AdmissionReview {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]admissionv1.AdmissionReview{}, ws.reviews[path]...)
}

func jsonPatchResponse(ops ...map[string]any) *admissionv1.AdmissionResponse {
	patch, _ := json.Marshal(ops)
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

func labelsOf(t *testing.T, raw []byte) map[string]string {
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Errorf("decoding the reviewed object: %v", err)
	}
	return obj.Metadata.Labels
}

// webhook renders one webhook of a configuration. target is either
// "service:NAME:PATH" or "url:URL".
func webhook(name, target, ns, extra string, caBundle []byte) string {
	var cc string
	switch kind, rest, _ := strings.Cut(target, ":"); kind {
	case "service":
		svc, path, _ := strings.Cut(rest, ":")
		cc = "    service:\n      name: " + svc + "\n      namespace: " + webhookNamespace + "\n      path: " + path + "\n"
	case "url":
		cc = "    url: " + rest + "\n"
	}
	return `
- name: ` + name + `
  admissionReviewVersions: ["v1"]
  sideEffects: None
  clientConfig:
    caBundle: ` + base64.StdEncoding.EncodeToString(caBundle) + `
` + cc + `  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["configmaps"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: ` + ns + `
` + indent(extra, "  ")
}

func mutationAnnotation(webhook string, mutated bool) string {
	return `{"configuration":"truce-test-mutating","webhook":"` + webhook + `","mutated":` + map[bool]string{true: "true", false: "false"}[mutated] + `}`
}

func patchAnnotation(webhook, patch string) string {
	return `{"configuration":"truce-test-mutating","webhook":"` + webhook + `","patch":` + patch + `,"patchType":"JSONPatch"}`
}

// ---------------------------------------------------------------------------

func TestWebhooks(t *testing.T) {
	ca := newTestCA(t, "truce-test-ca", []string{webhookService + "." + webhookNamespace + ".svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	addLabel := func(key, value string) reviewFunc {
		return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return jsonPatchResponse(map[string]any{"op": "add", "path": "/metadata/labels/" + key, "value": value})
		}
	}
	ws := newWebhookServer(t, ca, map[string]reviewFunc{
		"/add-label":     addLabel("webhook", "yes"),
		"/add-url-label": addLabel("url-webhook", "yes"),
		"/deny": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 403, Message: "not today"}}
		},
		// The first reinvocation webhook copies what the second one sets.
		"/reinvoke-first": func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			seen := "none"
			var obj struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(req.Object.Raw, &obj)
			if v, ok := obj.Metadata.Labels["second"]; ok {
				seen = v
			}
			return jsonPatchResponse(map[string]any{"op": "add", "path": "/metadata/labels/first-saw", "value": seen})
		},
		"/reinvoke-second": addLabel("second", "done"),
		"/record":          func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return allow() },
		"/sideeffects":     func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return allow() },
		"/validate-deny": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "validation says no"}}
		},
		"/validate-warn": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"be careful"}, AuditAnnotations: map[string]string{"checked": "yes"}}
		},
	})
	otherCA := newTestCA(t, "another-ca", []string{webhookService + "." + webhookNamespace + ".svc"}, nil)
	svc := func(path string) string { return "service:" + webhookService + ":" + path }
	urlTarget := "url:" + ws.URL + "/add-url-label"

	cluster := strings.Join([]string{
		namespace(webhookNamespace),
		namespace("wh-mutate"), namespace("wh-deny"), namespace("wh-offline-ignore"), namespace("wh-offline-fail"),
		namespace("wh-url"), namespace("wh-reinvoke"), namespace("wh-record"), namespace("wh-sideeffects"),
		namespace("wh-validate"), namespace("wh-validate-warn"), namespace("wh-badca"),
		withRV(cmWith("existing", "wh-record", map[string]string{"k": "old"}, map[string]string{"app": "x"}), "100"),
		`
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: truce-test-mutating
webhooks:` +
			webhook("label.example.com", svc("/add-label"), "wh-mutate", "", ca.caPEM) + // index 0
			webhook("deny.example.com", svc("/deny"), "wh-deny", "", ca.caPEM) + // 1
			webhook("offline-ignore.example.com", "service:offline-ignore:/x", "wh-offline-ignore", "failurePolicy: Ignore", ca.caPEM) + // 2
			webhook("offline-fail.example.com", "service:offline-fail:/x", "wh-offline-fail", "failurePolicy: Fail", ca.caPEM) + // 3
			webhook("url.example.com", urlTarget, "wh-url", "failurePolicy: Ignore", ca.caPEM) + // 4
			webhook("reinvoke-first.example.com", svc("/reinvoke-first"), "wh-reinvoke", "reinvocationPolicy: IfNeeded", ca.caPEM) + // 5
			webhook("reinvoke-second.example.com", svc("/reinvoke-second"), "wh-reinvoke", "", ca.caPEM) + // 6
			webhook("record.example.com", svc("/record"), "wh-record", "", ca.caPEM) + // 7
			strings.Replace(webhook("sideeffects.example.com", svc("/sideeffects"), "wh-sideeffects", "", ca.caPEM), "sideEffects: None", "sideEffects: NoneOnDryRun", 1) + // 8
			webhook("badca.example.com", svc("/add-label"), "wh-badca", "", otherCA.caPEM) + // 9
			`
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: truce-test-validating
webhooks:` +
			webhook("validate-deny.example.com", svc("/validate-deny"), "wh-validate", "", ca.caPEM) +
			webhook("validate-warn.example.com", svc("/validate-warn"), "wh-validate-warn", "", ca.caPEM),
	}, "\n---\n")

	endpoints := admission.WebhookEndpoints{webhookNamespace + "/" + webhookService: ws.URL}
	offline := newChain(t, admission.Options{WebhookEndpoints: endpoints}, cluster)
	callURLs := newChain(t, admission.Options{WebhookEndpoints: endpoints, CallURLWebhooks: true}, cluster)

	app := map[string]string{"app": "x"}
	urlHost := strings.TrimPrefix(ws.URL, "https://")

	type whEntry struct {
		name   string
		chain  *admission.Chain
		write  string
		user   string
		groups []string
		// calls is how many times each path must be called by this write.
		calls map[string]int
		want  want
		// review checks the reviews the write caused.
		review func(t *testing.T, reviews map[string][]admissionv1.AdmissionReview)
	}
	paths := []string{"/add-label", "/add-url-label", "/deny", "/reinvoke-first", "/reinvoke-second", "/record", "/sideeffects", "/validate-deny", "/validate-warn"}

	for _, e := range []whEntry{{
		name:  "mutating webhook adds a label",
		chain: offline,
		write: cmWith("c", "wh-mutate", nil, app),
		calls: map[string]int{"/add-label": 1},
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "webhook": "yes"}},
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_0": mutationAnnotation("label.example.com", true),
				"patch.webhook.admission.k8s.io/round_0_index_0":    patchAnnotation("label.example.com", `[{"op":"add","path":"/metadata/labels/webhook","value":"yes"}]`),
			},
			changes: []admission.Change{{Path: "/metadata/labels/webhook", By: "webhook label.example.com"}},
		},
	}, {
		name:  "mutating webhook denies",
		chain: offline,
		write: cmWith("c", "wh-deny", nil, app),
		calls: map[string]int{"/deny": 1},
		want: want{
			code:    403,
			message: `admission webhook "deny.example.com" denied the request: not today`,
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_1": mutationAnnotation("deny.example.com", false),
			},
		},
	}, {
		name:  "service without endpoint, failurePolicy Ignore",
		chain: offline,
		write: cmWith("c", "wh-offline-ignore", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x"}},
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_2":             mutationAnnotation("offline-ignore.example.com", false),
				"failed-open.mutation.webhook.admission.k8s.io/round_0_index_2": "offline-ignore.example.com",
			},
			unpredictable: []string{"mutating webhook offline-ignore.example.com (wh-system/offline-ignore)"},
		},
	}, {
		name:  "service without endpoint, failurePolicy Fail",
		chain: offline,
		write: cmWith("c", "wh-offline-fail", nil, app),
		want: want{
			code:          500,
			reason:        "InternalError",
			messagePrefix: `Internal error occurred: failed calling webhook "offline-fail.example.com": failed to call webhook: Post "https://offline-fail.wh-system.svc:443/x?timeout=10s": `,
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_3": mutationAnnotation("offline-fail.example.com", false),
			},
			unpredictable: []string{"mutating webhook offline-fail.example.com (wh-system/offline-fail)"},
		},
	}, {
		name:  "URL webhook is not called without CallURLWebhooks",
		chain: offline,
		write: cmWith("c", "wh-url", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x"}},
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_4":             mutationAnnotation("url.example.com", false),
				"failed-open.mutation.webhook.admission.k8s.io/round_0_index_4": "url.example.com",
			},
			unpredictable: []string{"mutating webhook url.example.com (" + urlHost + ")"},
		},
	}, {
		name:  "URL webhook is called with CallURLWebhooks",
		chain: callURLs,
		write: cmWith("c", "wh-url", nil, app),
		calls: map[string]int{"/add-url-label": 1},
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "url-webhook": "yes"}},
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_4": mutationAnnotation("url.example.com", true),
				"patch.webhook.admission.k8s.io/round_0_index_4":    patchAnnotation("url.example.com", `[{"op":"add","path":"/metadata/labels/url-webhook","value":"yes"}]`),
			},
			changes: []admission.Change{{Path: "/metadata/labels/url-webhook", By: "webhook url.example.com"}},
		},
	}, {
		// The second webhook changes what the first read; the first has
		// reinvocationPolicy IfNeeded and is called again (round 1).
		name:  "reinvocation",
		chain: offline,
		write: cmWith("c", "wh-reinvoke", nil, app),
		calls: map[string]int{"/reinvoke-first": 2, "/reinvoke-second": 1},
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "first-saw": "done", "second": "done"}},
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_5": mutationAnnotation("reinvoke-first.example.com", true),
				"patch.webhook.admission.k8s.io/round_0_index_5":    patchAnnotation("reinvoke-first.example.com", `[{"op":"add","path":"/metadata/labels/first-saw","value":"none"}]`),
				"mutation.webhook.admission.k8s.io/round_0_index_6": mutationAnnotation("reinvoke-second.example.com", true),
				"patch.webhook.admission.k8s.io/round_0_index_6":    patchAnnotation("reinvoke-second.example.com", `[{"op":"add","path":"/metadata/labels/second","value":"done"}]`),
				"mutation.webhook.admission.k8s.io/round_1_index_5": mutationAnnotation("reinvoke-first.example.com", true),
				"patch.webhook.admission.k8s.io/round_1_index_5":    patchAnnotation("reinvoke-first.example.com", `[{"op":"add","path":"/metadata/labels/first-saw","value":"done"}]`),
			},
			changes: []admission.Change{
				{Path: "/metadata/labels/first-saw", By: "webhook reinvoke-first.example.com"},
				{Path: "/metadata/labels/second", By: "webhook reinvoke-second.example.com"},
				{Path: "/metadata/labels/first-saw", By: "webhook reinvoke-first.example.com", Round: 1},
			},
		},
		review: func(t *testing.T, reviews map[string][]admissionv1.AdmissionReview) {
			first := reviews["/reinvoke-first"]
			if len(first) == 2 {
				if got := labelsOf(t, first[0].Request.Object.Raw)["second"]; got != "" {
					t.Errorf("first call saw second=%q, want none", got)
				}
				if got := labelsOf(t, first[1].Request.Object.Raw)["second"]; got != "done" {
					t.Errorf("reinvocation saw second=%q, want done", got)
				}
			}
		},
	}, {
		name:  "the review of a create",
		chain: offline,
		write: cmWith("c", "wh-record", map[string]string{"k": "v"}, app),
		calls: map[string]int{"/record": 1},
		want: want{
			allowed: true,
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_7": mutationAnnotation("record.example.com", false),
			},
		},
		review: func(t *testing.T, reviews map[string][]admissionv1.AdmissionReview) {
			rv := reviews["/record"]
			if len(rv) != 1 {
				return
			}
			checkReview(t, rv[0], reviewWant{
				operation: "CREATE", name: "c", namespace: "wh-record",
				user: "system:admin", groups: []string{"system:masters", "system:authenticated"},
				options: `{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"]}`,
				data:    map[string]string{"k": "v"},
			})
		},
	}, {
		name:  "the review of an update",
		chain: offline,
		write: withRV(cmWith("existing", "wh-record", map[string]string{"k": "new"}, app), "100"),
		user:  "alice",
		// alice is in system:masters: no RBAC needed.
		groups: []string{"system:masters"},
		calls:  map[string]int{"/record": 1},
		want: want{
			op:      admission.Update,
			allowed: true,
			fields:  map[string]any{"/data": map[string]any{"k": "new"}},
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_7": mutationAnnotation("record.example.com", false),
			},
		},
		review: func(t *testing.T, reviews map[string][]admissionv1.AdmissionReview) {
			rv := reviews["/record"]
			if len(rv) != 1 {
				return
			}
			checkReview(t, rv[0], reviewWant{
				operation: "UPDATE", name: "existing", namespace: "wh-record",
				user: "alice", groups: []string{"system:masters", "system:authenticated"},
				options: `{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"]}`,
				data:    map[string]string{"k": "new"}, oldData: map[string]string{"k": "old"},
			})
		},
	}, {
		// admissionregistration/v1 allows only None and NoneOnDryRun; both
		// are called on a dry run.
		name:  "sideEffects NoneOnDryRun is called on a dry run",
		chain: offline,
		write: cmWith("c", "wh-sideeffects", nil, app),
		calls: map[string]int{"/sideeffects": 1},
		want: want{
			allowed: true,
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_8": mutationAnnotation("sideeffects.example.com", false),
			},
		},
	}, {
		// The serving certificate is checked against the caBundle, for
		// the service's DNS name.
		name:  "caBundle of another CA",
		chain: offline,
		write: cmWith("c", "wh-badca", nil, app),
		want: want{
			code:    500,
			reason:  "InternalError",
			message: `Internal error occurred: failed calling webhook "badca.example.com": failed to call webhook: Post "https://webhook.wh-system.svc:443/add-label?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
			audit: map[string]string{
				"mutation.webhook.admission.k8s.io/round_0_index_9": mutationAnnotation("badca.example.com", false),
			},
		},
	}, {
		name:  "validating webhook denies",
		chain: offline,
		write: cmWith("c", "wh-validate", nil, app),
		calls: map[string]int{"/validate-deny": 1},
		want: want{
			code:    400,
			message: `admission webhook "validate-deny.example.com" denied the request: validation says no`,
		},
	}, {
		name:  "validating webhook warns and annotates",
		chain: offline,
		write: cmWith("c", "wh-validate-warn", nil, app),
		calls: map[string]int{"/validate-warn": 1},
		want: want{
			allowed:  true,
			warnings: []string{"be careful"},
			audit:    map[string]string{"validate-warn.example.com/checked": "yes"},
		},
	}} {
		t.Run(e.name, func(t *testing.T) {
			before := map[string]int{}
			for _, p := range paths {
				before[p] = len(ws.calls(p))
			}
			res := admit(t, e.chain, admission.Request{Object: object(t, e.write), User: e.user, Groups: e.groups})
			check(t, res, e.want)
			got := map[string][]admissionv1.AdmissionReview{}
			for _, p := range paths {
				all := ws.calls(p)
				got[p] = all[before[p]:]
				if len(got[p]) != e.calls[p] {
					t.Errorf("%s called %d times, want %d", p, len(got[p]), e.calls[p])
				}
			}
			if e.review != nil {
				e.review(t, got)
			}
		})
	}
}

type reviewWant struct {
	operation, name, namespace string
	user                       string
	groups                     []string
	options                    string
	data, oldData              map[string]string
}

func checkReview(t *testing.T, review admissionv1.AdmissionReview, w reviewWant) {
	t.Helper()
	r := review.Request
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		t.Errorf("review is %s %s", review.APIVersion, review.Kind)
	}
	if r.DryRun == nil || !*r.DryRun {
		t.Errorf("dryRun = %v, want true", r.DryRun)
	}
	if string(r.Operation) != w.operation {
		t.Errorf("operation = %q, want %q", r.Operation, w.operation)
	}
	if r.Name != w.name || r.Namespace != w.namespace {
		t.Errorf("name/namespace = %q/%q, want %q/%q", r.Name, r.Namespace, w.name, w.namespace)
	}
	if want := (metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); r.Kind != want || r.RequestKind == nil || *r.RequestKind != want {
		t.Errorf("kind = %v, requestKind = %v, want %v", r.Kind, r.RequestKind, want)
	}
	if want := (metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}); r.Resource != want || r.RequestResource == nil || *r.RequestResource != want {
		t.Errorf("resource = %v, requestResource = %v, want %v", r.Resource, r.RequestResource, want)
	}
	if r.UserInfo.Username != w.user || !equalStrings(r.UserInfo.Groups, w.groups) {
		t.Errorf("userInfo = %q %q, want %q %q", r.UserInfo.Username, r.UserInfo.Groups, w.user, w.groups)
	}
	var gotOptions, wantOptions any
	if err := json.Unmarshal(r.Options.Raw, &gotOptions); err != nil {
		t.Errorf("options: %v (%s)", err, r.Options.Raw)
	}
	if err := json.Unmarshal([]byte(w.options), &wantOptions); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotOptions, wantOptions) {
		t.Errorf("options = %s, want %s", r.Options.Raw, w.options)
	}
	var obj, old struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(r.Object.Raw, &obj); err != nil {
		t.Errorf("object: %v", err)
	}
	if !equalMaps(obj.Data, w.data) {
		t.Errorf("object data = %v, want %v", obj.Data, w.data)
	}
	if w.oldData == nil {
		if len(r.OldObject.Raw) != 0 {
			t.Errorf("oldObject = %s, want none", r.OldObject.Raw)
		}
	} else {
		if err := json.Unmarshal(r.OldObject.Raw, &old); err != nil {
			t.Errorf("oldObject: %v (%s)", err, r.OldObject.Raw)
		}
		if !equalMaps(old.Data, w.oldData) {
			t.Errorf("oldObject data = %v, want %v", old.Data, w.oldData)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
