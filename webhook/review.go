package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/truce-dev/truce/admission"
)

// reviewError is a request that cannot be answered with an AdmissionReview:
// the HTTP status and why. The API server treats any such answer as a call
// failure and applies the webhook's failurePolicy.
type reviewError struct {
	code int
	msg  string
}

func (e *reviewError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &reviewError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// decodeReview parses and checks an AdmissionReview request body. It
// returns the review and its request translated for the admission chain.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, admission.Review, error) {
	var review admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&review); err != nil {
		return nil, admission.Review{}, badRequest("decoding the AdmissionReview: %v", err)
	}
	if dec.More() {
		return nil, admission.Review{}, badRequest("decoding the AdmissionReview: data after the JSON object")
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return nil, admission.Review{}, badRequest("want an admission.k8s.io/v1 AdmissionReview, got apiVersion %q kind %q (set admissionReviewVersions: [v1])", review.APIVersion, review.Kind)
	}
	req := review.Request
	if req == nil {
		return nil, admission.Review{}, badRequest("the AdmissionReview has no request")
	}
	if req.UID == "" {
		return nil, admission.Review{}, badRequest("the AdmissionReview request has no uid")
	}
	op := admission.Operation(req.Operation)
	switch op {
	case admission.Create, admission.Update, "CONNECT":
		if len(req.Object.Raw) == 0 || string(req.Object.Raw) == "null" {
			return nil, admission.Review{}, badRequest("the AdmissionReview request for %s has no object", op)
		}
	case admission.Delete:
	default:
		return nil, admission.Review{}, badRequest("unknown operation %q", req.Operation)
	}
	if op == admission.Update && (len(req.OldObject.Raw) == 0 || string(req.OldObject.Raw) == "null") {
		return nil, admission.Review{}, badRequest("the AdmissionReview request for UPDATE has no oldObject")
	}
	if req.Kind.Kind == "" || req.Kind.Version == "" {
		return nil, admission.Review{}, badRequest("the AdmissionReview request has no kind")
	}
	if req.Namespace != "" {
		// Namespaces are recorded for the policies: only real names.
		if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
			return nil, admission.Review{}, badRequest("the AdmissionReview request's namespace %q is not a namespace name: %s", req.Namespace, strings.Join(errs, "; "))
		}
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = v
	}
	dryRun := req.DryRun != nil && *req.DryRun
	return &review, admission.Review{
		Operation:       op,
		Kind:            k8sschema.GroupVersionKind(req.Kind),
		Resource:        k8sschema.GroupVersionResource(req.Resource),
		RequestKind:     requestKind(req.RequestKind),
		RequestResource: requestResource(req.RequestResource),
		SubResource:     req.SubResource,
		Namespace:       req.Namespace,
		Name:            req.Name,
		Object:          req.Object.Raw,
		OldObject:       req.OldObject.Raw,
		Options:         req.Options.Raw,
		UserInfo:        &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra},
		DryRun:          dryRun,
	}, nil
}

// response builds the AdmissionReview answering review from a result of the
// chain; original is the object the server sent.
func response(review *admissionv1.AdmissionReview, res *admission.ReviewResult, original []byte) (*admissionv1.AdmissionReview, error) {
	out := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{
			UID:              review.Request.UID,
			Allowed:          res.Allowed,
			Warnings:         res.Warnings,
			AuditAnnotations: auditAnnotations(res.AuditAnnotations),
		},
	}
	if !res.Allowed {
		s := *res.Status
		// The server prefixes the message ("admission webhook %q denied
		// the request: ") and keeps code, reason and details.
		s.TypeMeta = metav1.TypeMeta{}
		s.Status = metav1.StatusFailure
		out.Response.Result = &s
		return out, nil
	}
	if res.Object == nil {
		return out, nil
	}
	patch, err := admissionPatch(original, res.Base, res.Object)
	if err != nil {
		return nil, err
	}
	if patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		out.Response.Patch = patch
		out.Response.PatchType = &pt
	}
	return out, nil
}

// auditAnnotations makes the chain's audit annotations valid webhook audit
// annotations: the server prefixes each key with the webhook's name and a
// slash, so a key must be a qualified name without one. "prefix/name"
// becomes "prefix_name"; a key longer than 63 characters is shortened with
// a hash suffix so that keys stay distinct.
func auditAnnotations(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[AuditAnnotationKey(k)] = v
	}
	return out
}

// AuditAnnotationKey is the key under which the webhook returns an audit
// annotation the policies recorded as k; the API server records it as
// "WEBHOOK-NAME/" + AuditAnnotationKey(k).
func AuditAnnotationKey(k string) string {
	key := strings.ReplaceAll(k, "/", "_")
	if len(validation.IsQualifiedName(key)) == 0 {
		return key
	}
	sum := sha256.Sum256([]byte(k))
	suffix := "-" + hex.EncodeToString(sum[:4])
	var b strings.Builder
	for _, r := range key {
		if b.Len() >= qualifiedNameMaxLength-len(suffix) {
			break
		}
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		}
	}
	head := strings.TrimLeft(strings.TrimRight(b.String(), "-_."), "-_.")
	if head == "" {
		head = "annotation"
	}
	return head + suffix
}

// qualifiedNameMaxLength is the longest name part of a qualified name
// (k8s.io/apimachinery/pkg/util/validation keeps it unexported).
const qualifiedNameMaxLength = 63

func requestKind(k *metav1.GroupVersionKind) k8sschema.GroupVersionKind {
	if k == nil {
		return k8sschema.GroupVersionKind{}
	}
	return k8sschema.GroupVersionKind(*k)
}

func requestResource(r *metav1.GroupVersionResource) k8sschema.GroupVersionResource {
	if r == nil {
		return k8sschema.GroupVersionResource{}
	}
	return k8sschema.GroupVersionResource(*r)
}
