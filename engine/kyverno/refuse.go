package kyverno

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

var _ admission.Refuser = (*Engine)(nil)

// Refusals implements admission.Refuser: the policies and PolicyExceptions
// among objs that Kyverno's webhooks for them refuse to create in a
// cluster holding cluster (its CRDs decide which kinds a policy may name),
// with Kyverno's message. The webhooks fail closed, so such an object never
// reaches the cluster and Kyverno never runs it.
func (e *Engine) Refusals(ctx context.Context, cluster, objs []*unstructured.Unstructured) (map[int]string, error) {
	if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return IsKyvernoKind(o.GroupVersionKind().GroupKind()) }) {
		return nil, nil
	}
	if err := e.init(); err != nil {
		return nil, err
	}
	all := make([]*unstructured.Unstructured, 0, len(cluster)+len(objs)+len(e.crds))
	all = append(append(append(all, cluster...), objs...), e.crds...)
	reg, err := registry(all)
	if err != nil {
		return nil, err
	}
	// The webhooks read discovery and the API server's version: a set
	// without policies serves them. The OpenAPI documents stay out: the
	// type check that reads them only warns, and only refusals count here.
	resp, err := e.h.call(ctx, &protocol.Request{Op: protocol.OpLoad, Load: e.loadRequest(reg)})
	if err != nil {
		return nil, fmt.Errorf("loading Kyverno to validate policies: %w", err)
	}
	hooks, err := readObjectWebhooks(resp.Webhooks)
	if err != nil {
		return nil, err
	}
	rh := &reviewHandler{h: e.h, set: resp.Set}
	out := map[int]string{}
	for i, o := range objs {
		gvk := o.GroupVersionKind()
		if !IsKyvernoKind(gvk.GroupKind()) {
			continue
		}
		res, err := reg.ForKind(gvk)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		path := hooks.path(o, res.GVR)
		if path == "" {
			continue // a kind no webhook of Kyverno's validates
		}
		msg, refused, err := refusal(ctx, rh, path, o, gvk, res.GVR, i)
		if err != nil {
			return nil, fmt.Errorf("validating %s %s with Kyverno: %w", o.GetKind(), o.GetName(), err)
		}
		if refused {
			out[i] = msg
		}
	}
	return out, nil
}

// objectConfigurations name the webhook configurations Kyverno generates
// for its own objects (its config package): validate-policy.kyverno.svc,
// the PolicyExceptions' webhooks and the cleanup controller's for its
// cleanup policies.
var objectConfigurations = []string{
	"kyverno-policy-validating-webhook-cfg",
	"kyverno-exception-validating-webhook-cfg",
	"kyverno-cel-exception-validating-webhook-cfg",
	"kyverno-cleanup-validating-webhook-cfg",
}

// objectWebhooks are the webhooks of objectConfigurations, among the
// configurations Kyverno generated, that fail closed.
type objectWebhooks []admissionregistrationv1.ValidatingWebhook

func readObjectWebhooks(configs []json.RawMessage) (objectWebhooks, error) {
	var out objectWebhooks
	for _, raw := range configs {
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decoding a webhook configuration from the Kyverno helper: %w", err)
		}
		if c.Kind != "ValidatingWebhookConfiguration" || !slices.Contains(objectConfigurations, c.Name) {
			continue
		}
		for _, w := range c.Webhooks {
			if w.ClientConfig.Service != nil && w.ClientConfig.Service.Path != nil &&
				w.FailurePolicy != nil && *w.FailurePolicy == admissionregistrationv1.Fail {
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// path is the path, as the helper serves it, of the webhook whose rules
// match creating o (a resource gvr) with kube-apiserver's own rule
// matcher; "" for none. Under matchPolicy Equivalent (Kyverno sets none,
// the API's default) the server sends a write through any version a rule
// names, so versions are not compared.
func (ws objectWebhooks) path(o *unstructured.Unstructured, gvr k8sschema.GroupVersionResource) string {
	attrs := k8sadmission.NewAttributesRecord(o, nil, o.GroupVersionKind(), o.GetNamespace(), o.GetName(), gvr, "", k8sadmission.Create, nil, false, nil)
	for _, w := range ws {
		for _, r := range w.Rules {
			if w.MatchPolicy == nil || *w.MatchPolicy == admissionregistrationv1.Equivalent {
				r.APIVersions = []string{"*"}
			}
			if !(&rules.Matcher{Rule: r, Attr: attrs}).Matches() {
				continue
			}
			path := *w.ClientConfig.Service.Path
			if w.ClientConfig.Service.Namespace+"/"+w.ClientConfig.Service.Name == CleanupService {
				path = protocol.CleanupServicePrefix + path
			}
			return path
		}
	}
	return ""
}

// refusal asks the webhook at path about creating o, and returns its
// denial, if it denies.
func refusal(ctx context.Context, rh *reviewHandler, path string, o *unstructured.Unstructured, gvk k8sschema.GroupVersionKind, gvr k8sschema.GroupVersionResource, i int) (string, bool, error) {
	raw, err := json.Marshal(o.Object)
	if err != nil {
		return "", false, err
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("truce-policy-%d", i)),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
			Name:      o.GetName(),
			Namespace: o.GetNamespace(),
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: "truce"},
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		return "", false, err
	}
	answer, err := rh.review(ctx, path, body)
	if err != nil {
		return "", false, err
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &got); err != nil {
		return "", false, fmt.Errorf("decoding Kyverno's answer: %w", err)
	}
	if got.Response == nil {
		return "", false, fmt.Errorf("kyverno answered no response")
	}
	if got.Response.Allowed {
		return "", false, nil
	}
	msg := "refused"
	if got.Response.Result != nil && got.Response.Result.Message != "" {
		msg = got.Response.Result.Message
	}
	return msg, true, nil
}
