package kyverno

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// maxReview bounds an AdmissionReview body, as kube-apiserver bounds
// requests (3 MiB objects, old and new).
const maxReview = 16 << 20

// reviewHandler serves a policy set's webhook paths: each AdmissionReview
// goes to the helper, which answers it with Kyverno's admission server.
type reviewHandler struct {
	h   *helper
	set string
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
	review, err := rh.review(r.Context(), r.URL.Path, body)
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
	resp, err := rh.h.call(ctx, &request{Op: "review", Review: &reviewRequest{Set: rh.set, Path: path, Review: body}})
	if err != nil {
		return nil, err
	}
	if len(resp.Review) == 0 {
		return nil, fmt.Errorf("the Kyverno helper answered no AdmissionReview for %s", path)
	}
	return resp.Review, nil
}
