package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/policycache"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kyverno's legacy mutation handler takes the policies for a request from
// its policy cache, a set (pkg/policycache/store.go get: a map range), and
// applies them one after another: two ClusterPolicies that mutate the same
// fields give a different object depending on an order Kyverno does not
// fix. truce answers in one of Kyverno's orders, policy keys ascending, so
// that its answers are stable, and asks again in the reverse order: when
// the objects differ, the result is Kyverno's roll of the dice, and the
// review is reported Unpredictable, naming the policies.

// orderedCache is Kyverno's policy cache answering in a fixed order.
type orderedCache struct {
	policycache.Cache
	reverse bool
}

func (c orderedCache) GetPolicies(t policycache.PolicyType, gvr schema.GroupVersionResource, sub string, ns *corev1.Namespace) []kyvernov1.PolicyInterface {
	ps := c.Cache.GetPolicies(t, gvr, sub, ns)
	// Namespace, then name: cluster-wide policies first.
	slices.SortFunc(ps, func(a, b kyvernov1.PolicyInterface) int {
		x := cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
		if c.reverse {
			return -x
		}
		return x
	})
	return ps
}

// legacyPolicyName is "ClusterPolicy NAME" or "Policy NAMESPACE/NAME"
// (listed policies carry no kind).
func legacyPolicyName(p kyvernov1.PolicyInterface) string {
	if p.IsNamespaced() {
		return "Policy " + policyKey(p)
	}
	return "ClusterPolicy " + policyKey(p)
}

// isLegacyMutation reports whether path is one of the resource mutation
// webhook's paths (ClusterPolicy and Policy mutate rules).
func isLegacyMutation(path string) bool {
	return path == config.MutatingWebhookServicePath || strings.HasPrefix(path, config.MutatingWebhookServicePath+"/")
}

// orderDependence asks the reverse-order mux for the same review and
// reports, when the mutated objects differ, which policies Kyverno applies
// in no fixed order. first is the answer of the forward mux.
func orderDependence(ctx context.Context, reverse http.Handler, pc policycache.Cache, path string, review, first []byte) (string, error) {
	obj, patch, req, err := patchOf(review, first)
	if err != nil || patch == nil {
		return "", err
	}
	// The reverse run's own unpredictable entries are the forward run's.
	ctx, _ = withUnpredictable(ctx)
	hr := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(review))
	hr.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	reverse.ServeHTTP(rec, hr)
	if rec.Code != http.StatusOK {
		return "", fmt.Errorf("kyverno answered %s on %s in the reverse order", http.StatusText(rec.Code), path)
	}
	_, patch2, _, err := patchOf(review, rec.Body.Bytes())
	if err != nil {
		return "", err
	}
	a, err := applyPatch(obj, patch)
	if err != nil {
		return "", err
	}
	b := obj
	if patch2 != nil {
		if b, err = applyPatch(obj, patch2); err != nil {
			return "", err
		}
	}
	if jsonpatch.Equal(a, b) {
		return "", nil
	}
	var names []string
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	ns := &corev1.Namespace{}
	ns.Name = req.Namespace
	for _, p := range (orderedCache{Cache: pc}).GetPolicies(policycache.Mutate, gvr, req.SubResource, ns) {
		names = append(names, legacyPolicyName(p))
	}
	return fmt.Sprintf("Kyverno applies the mutate rules of %s in no fixed order (its policy cache is a set), and the mutated object depends on the order", strings.Join(names, ", ")), nil
}

// patchOf returns the request's object, the JSON patch of the answer (nil
// when it has none or denies) and the request.
func patchOf(review, answer []byte) ([]byte, []byte, *admissionv1.AdmissionRequest, error) {
	var in, out admissionv1.AdmissionReview
	if err := json.Unmarshal(review, &in); err != nil {
		return nil, nil, nil, fmt.Errorf("decoding the review: %w", err)
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return nil, nil, nil, fmt.Errorf("decoding Kyverno's answer: %w", err)
	}
	if in.Request == nil || out.Response == nil || !out.Response.Allowed || len(out.Response.Patch) == 0 {
		return nil, nil, in.Request, nil
	}
	return in.Request.Object.Raw, out.Response.Patch, in.Request, nil
}

func applyPatch(obj, patch []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, fmt.Errorf("decoding Kyverno's patch: %w", err)
	}
	out, err := p.Apply(obj)
	if err != nil {
		return nil, fmt.Errorf("applying Kyverno's patch: %w", err)
	}
	return out, nil
}
