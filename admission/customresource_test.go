package admission_test

import (
	"encoding/base64"
	"net"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/truce-dev/truce/admission"
)

// TestCustomResourceAfterWebhookPatch: a mutating webhook's patch of a
// custom resource goes through the CRD's schema steps again, as in the CRD
// handler: defaulting after the patch, validation, then pruning by storage.
func TestCustomResourceAfterWebhookPatch(t *testing.T) {
	ca := newTestCA(t, "truce-test-ca", []string{webhookService + "." + webhookNamespace + ".svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	patch := func(ops ...map[string]any) reviewFunc {
		return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return jsonPatchResponse(ops...) }
	}
	ws := newWebhookServer(t, ca, map[string]reviewFunc{
		"/remove-size": patch(map[string]any{"op": "remove", "path": "/spec/size"}),
		"/add-extra":   patch(map[string]any{"op": "add", "path": "/spec/extra", "value": map[string]any{"a": 1}}),
		"/size-zero":   patch(map[string]any{"op": "replace", "path": "/spec/size", "value": 0}),
		"/size-string": patch(map[string]any{"op": "replace", "path": "/spec/size", "value": "three"}),
	})
	const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.wh.truce.dev}
spec:
  group: wh.truce.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer, minimum: 1, default: 3}`
	const gadget = `
apiVersion: wh.truce.dev/v1
kind: Gadget
metadata: {name: g, namespace: wh}
spec: {color: blue, size: 5}`
	config := func(path string) string {
		return `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: patch}
webhooks:
- name: patch.example.com
  admissionReviewVersions: ["v1"]
  sideEffects: None
  clientConfig:
    caBundle: ` + base64.StdEncoding.EncodeToString(ca.caPEM) + `
    service: {name: ` + webhookService + `, namespace: ` + webhookNamespace + `, path: ` + path + `}
  rules:
  - apiGroups: [wh.truce.dev]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [gadgets]`
	}
	for _, tc := range []struct {
		name, path string
		want       want
	}{{
		name: "a defaulted field the webhook removed is defaulted again",
		path: "/remove-size",
		want: want{allowed: true, fields: map[string]any{"/spec/size": 3},
			changes: []admission.Change{{Path: "/spec/size", By: "webhook patch.example.com"}}},
	}, {
		name: "a field the schema does not know is pruned, without a warning",
		path: "/add-extra",
		want: want{allowed: true, fields: map[string]any{"/spec/extra": absent, "/spec/size": 5}},
	}, {
		name: "a value below the minimum is invalid",
		path: "/size-zero",
		want: want{code: 422, reason: "Invalid",
			message: `Gadget.wh.truce.dev "g" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1`},
	}, {
		name: "a value of the wrong type is invalid",
		path: "/size-string",
		want: want{code: 422, reason: "Invalid",
			message: `Gadget.wh.truce.dev "g" is invalid: spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, admission.Options{WebhookEndpoints: admission.WebhookEndpoints{webhookNamespace + "/" + webhookService: ws.URL}},
				namespace(webhookNamespace), namespace("wh"), crd, config(tc.path))
			res := admit(t, c, admission.Request{Object: object(t, gadget)})
			// The webhook's audit annotations are TestWebhooks' business.
			tc.want.audit = res.AuditAnnotations
			check(t, res, tc.want)
		})
	}
}
