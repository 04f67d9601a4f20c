package admission_test

import (
	"net"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/truce-dev/truce/admission"
)

// An in-process webhook is called by the upstream webhook plugin like a
// served one, with the caBundle verified; it needs no --webhook-endpoint.
func TestInProcessWebhook(t *testing.T) {
	ca := newTestCA(t, "truce-test-ca", []string{webhookService + "." + webhookNamespace + ".svc"}, []net.IP{})
	ws := newWebhookServer(t, ca, map[string]reviewFunc{
		"/add-label": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return jsonPatchResponse(map[string]any{"op": "add", "path": "/metadata/labels/webhook", "value": "in-process"})
		},
	})
	otherCA := newTestCA(t, "another-ca", []string{webhookService + "." + webhookNamespace + ".svc"}, nil)
	svc := "service:" + webhookService + ":/add-label"
	cluster := strings.Join([]string{
		namespace(webhookNamespace), namespace("wh-mutate"), namespace("wh-badca"),
		`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: truce-test-mutating
webhooks:` + webhook("label.example.com", svc, "wh-mutate", "", ca.caPEM) +
			webhook("badca.example.com", svc, "wh-badca", "", otherCA.caPEM),
	}, "\n---\n")
	hooks := admission.InProcessWebhooks{webhookNamespace + "/" + webhookService: {Handler: ws.Config.Handler, Certificate: ca.cert}}
	// WebhookEndpoints naming a dead address prove the in-process server
	// takes precedence.
	dead := admission.WebhookEndpoints{webhookNamespace + "/" + webhookService: "https://127.0.0.1:1"}
	chain := newChain(t, admission.Options{InProcessWebhooks: hooks, WebhookEndpoints: dead}, cluster)
	app := map[string]string{"app": "x"}

	res := admit(t, chain, admission.Request{Object: object(t, cmWith("c", "wh-mutate", nil, app))})
	check(t, res, want{
		allowed: true,
		fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "webhook": "in-process"}},
		audit: map[string]string{
			"mutation.webhook.admission.k8s.io/round_0_index_0": mutationAnnotation("label.example.com", true),
			"patch.webhook.admission.k8s.io/round_0_index_0":    patchAnnotation("label.example.com", `[{"op":"add","path":"/metadata/labels/webhook","value":"in-process"}]`),
		},
		changes: []admission.Change{{Path: "/metadata/labels/webhook", By: "webhook label.example.com"}},
	})
	if n := len(ws.calls("/add-label")); n != 1 {
		t.Errorf("handler called %d times, want 1", n)
	}

	// A caBundle that does not verify the served certificate fails the
	// call as it would in a cluster (failurePolicy Fail).
	res = admit(t, chain, admission.Request{Object: object(t, cmWith("c", "wh-badca", nil, app))})
	if res.Allowed || !strings.Contains(res.Message, "failed calling webhook") {
		t.Errorf("bad caBundle: allowed=%v message=%q, want a failed call", res.Allowed, res.Message)
	}
	if n := len(ws.calls("/add-label")); n != 1 {
		t.Errorf("handler called %d times after the bad-CA write, want still 1", n)
	}
}
