package kyverno

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// maxReview bounds an AdmissionReview body, as kube-apiserver bounds
// requests (3 MiB objects, old and new).
const maxReview = 16 << 20

// policyValidatePath is the path of Kyverno's validate-policy.kyverno.svc
// (its config.PolicyValidatingWebhookServicePath).
const policyValidatePath = "/policyvalidate"

// reviewHandler serves a policy set's webhook paths: each AdmissionReview
// goes to the helper, which answers it with Kyverno's admission server.
type reviewHandler struct {
	h   *helper
	set string
	// prefix is put before the paths of the Service served
	// (protocol.CleanupServicePrefix for the cleanup controller's).
	prefix string
	// withDocs, when set, gives the set loaded with the cluster's OpenAPI
	// documents, which the policy webhook's path is served from.
	withDocs func(context.Context) (string, error)
}

func (rh *reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "only POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(w, "reading the AdmissionReview failed or it is too large", http.StatusBadRequest)
		return
	}
	review, err := rh.review(r.Context(), rh.prefix+r.URL.Path, body)
	if err != nil {
		// The webhook plugin applies the webhook's failurePolicy to this,
		// as to a Kyverno pod that does not answer.
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(review)
}

func (rh *reviewHandler) review(ctx context.Context, path string, body []byte) (json.RawMessage, error) {
	set := rh.set
	if rh.withDocs != nil && path == policyValidatePath {
		var err error
		if set, err = rh.withDocs(ctx); err != nil {
			return nil, err
		}
	}
	resp, err := rh.h.call(ctx, &protocol.Request{Op: protocol.OpReview, Review: &protocol.ReviewRequest{Set: set, Path: path, Review: body}})
	if err != nil {
		return nil, err
	}
	if len(resp.Review) == 0 {
		return nil, fmt.Errorf("the Kyverno helper answered no AdmissionReview for %s", path)
	}
	if len(resp.Unpredictable) == 0 {
		return resp.Review, nil
	}
	return withUnpredictable(resp.Review, resp.Unpredictable)
}

// withUnpredictable adds what Kyverno could not decide offline to the
// review's audit annotations under admission.UnpredictableAnnotation,
// which the chain moves into Result.Unpredictable; the rest of Kyverno's
// answer is left as it is.
func withUnpredictable(review json.RawMessage, unpredictable []string) (json.RawMessage, error) {
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(review, &r); err != nil {
		return nil, fmt.Errorf("decoding the Kyverno helper's AdmissionReview: %w", err)
	}
	if r.Response == nil {
		return review, nil
	}
	if r.Response.AuditAnnotations == nil {
		r.Response.AuditAnnotations = map[string]string{}
	}
	r.Response.AuditAnnotations[admission.UnpredictableAnnotation] = strings.Join(unpredictable, "; ")
	return json.Marshal(&r)
}
