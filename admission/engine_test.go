package admission_test

import (
	"context"
	"encoding/base64"
	"net"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
)

// labelEngine is a policy engine configured by ConfigMaps labelled
// engine-policy: each names a label its webhook adds to ConfigMaps of the
// namespace "engine-target".
type labelEngine struct {
	t        testing.TB
	ca       testCA
	handler  func(labels map[string]string) reviewFunc
	installs int
}

func (e *labelEngine) Name() string { return "label engine" }

func (e *labelEngine) Configures(gk k8sschema.GroupKind) bool {
	return gk == k8sschema.GroupKind{Kind: "ConfigMap"}
}

func (e *labelEngine) Install(_ context.Context, objs []*unstructured.Unstructured) (*admission.Installation, error) {
	e.installs++
	labels := map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetLabels()["engine-policy"] == "true" {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			labels[data["key"]] = data["value"]
		}
	}
	cfg := object(e.t, `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: label-engine
webhooks:
- name: label.engine.example.com
  admissionReviewVersions: ["v1"]
  sideEffects: None
  clientConfig:
    caBundle: `+base64.StdEncoding.EncodeToString(e.ca.caPEM)+`
    service: {namespace: engine-system, name: engine, path: /mutate}
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["configmaps"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: engine-target
`)
	ws := newWebhookServer(e.t, e.ca, map[string]reviewFunc{"/mutate": e.handler(labels)})
	return &admission.Installation{
		Objects:  []*unstructured.Unstructured{cfg},
		Webhooks: admission.InProcessWebhooks{"engine-system/engine": {Handler: ws.Config.Handler, Certificate: e.ca.cert}},
	}, nil
}

func TestPolicyEngine(t *testing.T) {
	ca := newTestCA(t, "engine-ca", []string{"engine.engine-system.svc"}, []net.IP{})
	eng := &labelEngine{t: t, ca: ca, handler: func(labels map[string]string) reviewFunc {
		return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			var ops []map[string]any
			for k, v := range labels {
				ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + k, "value": v})
			}
			return jsonPatchResponse(ops...)
		}
	}}
	policy := cmWith("policy", "engine-system", map[string]string{"key": "team", "value": "a"}, map[string]string{"engine-policy": "true"})
	chain := newChain(t, admission.Options{Engines: []admission.PolicyEngine{eng}},
		namespace("engine-system"), namespace("engine-target"), policy)

	res := admit(t, chain, admission.Request{Object: object(t, cmWith("c", "engine-target", nil, map[string]string{"app": "x"}))})
	check(t, res, want{
		allowed: true,
		fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "team": "a"}},
		audit: map[string]string{
			"mutation.webhook.admission.k8s.io/round_0_index_0": `{"configuration":"label-engine","webhook":"label.engine.example.com","mutated":true}`,
			"patch.webhook.admission.k8s.io/round_0_index_0":    `{"configuration":"label-engine","webhook":"label.engine.example.com","patch":[{"op":"add","path":"/metadata/labels/team","value":"a"}],"patchType":"JSONPatch"}`,
		},
		changes: []admission.Change{{Path: "/metadata/labels/team", By: "webhook label.engine.example.com"}},
	})
	if _, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, "", "label-engine"); !ok {
		t.Error("the engine's webhook configuration is not in the state")
	}

	// Writing an object that configures the engine asks for a rebuild.
	res = admit(t, chain, admission.Request{Object: object(t, cmWith("policy2", "engine-system", map[string]string{"key": "tier", "value": "b"}, map[string]string{"engine-policy": "true"}))})
	reconfigure, err := chain.Commit(res)
	if err != nil || !reconfigure {
		t.Fatalf("Commit of an engine's configuration: reconfigure=%v err=%v, want a rebuild", reconfigure, err)
	}
	rebuilt, err := admission.NewChain(context.Background(), chain.State(), admission.Options{Engines: []admission.PolicyEngine{eng}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rebuilt.Close)
	res = admit(t, rebuilt, admission.Request{Object: object(t, cmWith("c", "engine-target", nil, map[string]string{"app": "x"}))})
	labels, _, _ := unstructured.NestedStringMap(res.Object, "metadata", "labels")
	if labels["team"] != "a" || labels["tier"] != "b" {
		t.Errorf("after the rebuild labels = %v, want team=a and tier=b", labels)
	}
	if eng.installs != 2 {
		t.Errorf("engine installed %d times, want 2", eng.installs)
	}
}
