package configuration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/internal/certs"
	"github.com/truce-dev/truce/manifest"
)

// TestAdmittedByTheAPIServer writes the generated configurations through
// truce's offline kube-apiserver chain (decoding, defaulting, the upstream
// registry validation of webhook configurations), then checks which writes
// they send to the webhook and what their failure policies do when it is
// unreachable (the chain cannot call a Service offline).
func TestAdmittedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	examples, err := manifest.LoadPaths(ctx, []string{"../../examples/image-mirror/cluster"}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var policies []*unstructured.Unstructured
	for _, o := range examples {
		policies = append(policies, o.Object)
	}
	// A wildcard policy adds the Lease exclusion to the validating webhook.
	policies = append(policies, parse(t, vapPolicy("everything", everything)+
		"apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: everything}\nspec: {policyName: everything}\n")...)

	ca := testCA(t)
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"service", serviceOptions(ca)},
		{"url", Options{Name: "truce-external", URL: "https://truce.example.com:8443/admission", CABundle: ca, Namespace: "truce-system", TimeoutSeconds: 30}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Generate(policies, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			configs, err := got.Objects()
			if err != nil {
				t.Fatal(err)
			}
			if len(configs) != 2 {
				t.Fatalf("%d configurations", len(configs))
			}
			state, err := admission.NewState(parse(t, `
apiVersion: v1
kind: Namespace
metadata: {name: truce-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
`)...)
			if err != nil {
				t.Fatal(err)
			}
			chain, err := admission.NewChain(ctx, state, admission.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { chain.Close() }()
			for _, c := range configs {
				res, err := chain.Admit(ctx, admission.Request{Object: c})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					t.Fatalf("%s denied: %s", c.GetKind(), res.Message)
				}
				// Every field the server defaults is set already: what is
				// applied is what is stored, no drift for a GitOps tool.
				if diff := cmp.Diff(c.Object["webhooks"], res.Object["webhooks"]); diff != "" {
					t.Errorf("%s: the server stores other webhooks (-generated +stored):\n%s", c.GetKind(), diff)
				}
				if len(res.Changes) != 0 || len(res.Warnings) != 0 || len(res.Notes) != 0 {
					t.Errorf("%s: changes %+v, warnings %q, notes %q", c.GetKind(), res.Changes, res.Warnings, res.Notes)
				}
				if _, err := chain.Commit(res); err != nil {
					t.Fatal(err)
				}
			}
			if tt.name == "service" {
				checkCalls(t, state, policies)
			}
		})
	}
}

// fakeWebhook answers AdmissionReviews on loopback, allowing everything or
// failing every call, and records which path was called for which kind.
type fakeWebhook struct {
	mu    sync.Mutex
	fail  bool
	calls []string
}

func (f *fakeWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	call := r.URL.Path + " " + review.Request.Kind.Kind
	if !slices.Contains(f.calls, call) {
		f.calls = append(f.calls, call)
	}
	if f.fail {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func (f *fakeWebhook) reset(fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.calls = fail, nil
}

func (f *fakeWebhook) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.calls)
	slices.Sort(out)
	return out
}

// checkCalls writes objects in and out of the webhooks' reach against a
// webhook served on loopback with a certificate for the Service's name, as
// the API server would call it, and checks which writes reach it and what
// the failure policies do when it fails.
func checkCalls(t *testing.T, state *admission.State, policies []*unstructured.Unstructured) {
	ca, pair, err := certs.Loopback("truce-webhook.truce-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hook := &fakeWebhook{}
	srv := httptest.NewUnstartedServer(hook)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	// The configurations again, for this CA, replacing those in the state.
	got, err := Generate(policies, serviceOptions(ca.PEM))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := got.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := state.Put(o); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	chain, err := admission.NewChain(ctx, state, admission.Options{
		WebhookEndpoints: admission.WebhookEndpoints{"truce-system/truce-webhook": srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()

	deployment := func(ns string) string {
		return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ` + ns + `}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
`
	}
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"
	for _, tt := range []struct {
		name        string
		object      string
		fail        bool // the webhook answers 500
		wantAllowed bool
		wantCalls   []string
	}{
		{"a Deployment in an application namespace goes to both", deployment("shop"), false, true, []string{"/mutate Deployment", "/validate Deployment"}},
		{"kube-system is excluded", deployment("kube-system"), false, true, nil},
		{"the webhook's namespace is excluded", deployment("truce-system"), false, true, nil},
		{"a ConfigMap goes to the wildcard policy's validating webhook only", configMap, false, true, []string{"/validate ConfigMap"}},
		{"a Lease is excluded by the matchCondition", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: l, namespace: shop}\nspec: {holderIdentity: a}\n", false, true, nil},
		{"a webhook configuration is never sent", "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: other}\n", false, true, nil},
		{"webhook down: mutating fails open, validating fails closed", deployment("shop"), true, false, []string{"/mutate Deployment", "/validate Deployment"}},
		{"webhook down: the excluded namespaces keep working", deployment("truce-system"), true, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hook.reset(tt.fail)
			res, err := chain.Admit(ctx, admission.Request{Object: parse(t, tt.object)[0]})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tt.wantAllowed {
				t.Errorf("allowed %v, want %v: %s", res.Allowed, tt.wantAllowed, res.Message)
			}
			if !res.Allowed && !strings.Contains(res.Message, got.Validating.Webhooks[0].Name) {
				t.Errorf("the rejection does not name the validating webhook: %s", res.Message)
			}
			if calls := hook.called(); !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("calls %q, want %q", calls, tt.wantCalls)
			}
		})
	}
}
