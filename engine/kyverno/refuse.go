package kyverno

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// validatePath is where the webhook validating objects of gk, one of
// Kyverno's own kinds, sends requests (Kyverno's config package):
// validate-policy.kyverno.svc for policies, the PolicyExceptions' webhooks
// for them; "" for a kind no such webhook validates.
func validatePath(gk k8sschema.GroupKind) string {
	switch {
	case gk.Kind == "PolicyException" && gk.Group == GroupLegacy:
		return "/exceptionvalidate"
	case gk.Kind == "PolicyException" && gk.Group == GroupCEL:
		return "/celexception/validate"
	case Uses(gk):
		return "/policyvalidate"
	}
	return ""
}

var _ admission.Refuser = (*Engine)(nil)

// Refusals implements admission.Refuser: the policies and PolicyExceptions
// among objs that Kyverno's webhooks for them refuse to create in a
// cluster holding cluster (its CRDs decide which kinds a policy may name),
// with Kyverno's message. The webhooks fail closed, so such an object never
// reaches the cluster and Kyverno never runs it.
func (e *Engine) Refusals(ctx context.Context, cluster, objs []*unstructured.Unstructured) (map[int]string, error) {
	var policies []int
	for i, o := range objs {
		if validatePath(o.GroupVersionKind().GroupKind()) != "" {
			policies = append(policies, i)
		}
	}
	if len(policies) == 0 {
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
	// The webhook reads only discovery and the API server's version: a set
	// without policies serves it.
	load, err := e.loadRequest(reg)
	if err != nil {
		return nil, err
	}
	resp, err := e.h.call(ctx, &protocol.Request{Op: protocol.OpLoad, Load: load})
	if err != nil {
		return nil, fmt.Errorf("loading Kyverno to validate policies: %w", err)
	}
	rh := &reviewHandler{h: e.h, set: resp.Set}
	out := map[int]string{}
	for _, i := range policies {
		o := objs[i]
		gvk := o.GroupVersionKind()
		res, err := reg.ForKind(gvk)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		req := &admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID(fmt.Sprintf("truce-policy-%d", i)),
				Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
				Resource:  metav1.GroupVersionResource{Group: res.GVR.Group, Version: res.GVR.Version, Resource: res.GVR.Resource},
				Name:      o.GetName(),
				Namespace: o.GetNamespace(),
				Operation: admissionv1.Create,
				UserInfo:  authenticationv1.UserInfo{Username: "truce"},
				Object:    runtime.RawExtension{Raw: raw},
			},
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		answer, err := rh.review(ctx, validatePath(gvk.GroupKind()), body)
		if err != nil {
			return nil, fmt.Errorf("validating %s %s with Kyverno: %w", o.GetKind(), o.GetName(), err)
		}
		var got admissionv1.AdmissionReview
		if err := json.Unmarshal(answer, &got); err != nil {
			return nil, fmt.Errorf("decoding Kyverno's answer for %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if got.Response == nil {
			return nil, fmt.Errorf("kyverno answered no response for %s %s", o.GetKind(), o.GetName())
		}
		if !got.Response.Allowed {
			msg := "refused"
			if got.Response.Result != nil && got.Response.Result.Message != "" {
				msg = got.Response.Result.Message
			}
			out[i] = msg
		}
	}
	return out, nil
}
