// Package protocol is the line-delimited JSON protocol between truce and
// its Kyverno helper, truce-kyverno: one request a line on the helper's
// standard input, one response a line on its standard output. It imports
// nothing of Kyverno, so its tests build in seconds.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProtocolVersion is the version of the protocol between truce and this
// helper. A request of another version is refused, so a truce and a helper
// built from different commits fail with a clear error instead of
// misreading each other.
const ProtocolVersion = 2

// The operations of the protocol.
const (
	// OpHello answers the protocol version and Kyverno's version.
	OpHello = "hello"
	// OpLoad loads a policy set (policies, exceptions, namespaces and the
	// cluster's discovery) and answers its id and the webhook
	// configurations Kyverno generates for it.
	OpLoad = "load"
	// OpReview answers an AdmissionReview sent to one of a set's webhook
	// paths, as Kyverno's admission server answers it.
	OpReview = "review"
	// OpUnload forgets a set.
	OpUnload = "unload"
)

// Request is one line on the helper's standard input.
type Request struct {
	V      int            `json:"v"`
	ID     uint64         `json:"id"`
	Op     string         `json:"op"`
	Load   *LoadRequest   `json:"load,omitempty"`
	Review *ReviewRequest `json:"review,omitempty"`
	Set    string         `json:"set,omitempty"`
}

// LoadRequest carries what configures Kyverno: the objects its informers
// would see, the resources discovery would list and the CA of its serving
// certificate.
type LoadRequest struct {
	// Objects are ClusterPolicies, Policies, PolicyExceptions, the CEL
	// policy kinds, Namespaces, and RBAC bindings (for roles in policy
	// contexts).
	Objects []json.RawMessage `json:"objects"`
	// Resources is the cluster's discovery, as kube-apiserver serves it.
	Resources []*metav1.APIResourceList `json:"resources"`
	// CABundle is the PEM CA the webhook configurations carry.
	CABundle []byte `json:"caBundle"`
	// OpenAPI are the cluster's OpenAPI v3 documents by server path
	// ("api/v1", "apis/apps/v1"), gzipped JSON, as kube-apiserver serves
	// them under /openapi/v3: MutatingPolicies apply their
	// ApplyConfigurations with type converters built from them. Sent only
	// when the set holds MutatingPolicies.
	OpenAPI map[string][]byte `json:"openAPI,omitempty"`
}

// ReviewRequest is an AdmissionReview sent to Path of a set.
type ReviewRequest struct {
	Set    string          `json:"set"`
	Path   string          `json:"path"`
	Review json.RawMessage `json:"review"`
}

// Response is one line on the helper's standard output.
type Response struct {
	V     int    `json:"v"`
	ID    uint64 `json:"id"`
	Error string `json:"error,omitempty"`
	// Hello
	Kyverno string `json:"kyverno,omitempty"`
	// Load
	Set      string            `json:"set,omitempty"`
	Webhooks []json.RawMessage `json:"webhooks,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	// Review
	Review json.RawMessage `json:"review,omitempty"`
}

// DecodeRequest decodes and checks one request line.
func DecodeRequest(line []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("decoding a request: %w", err)
	}
	if r.V != ProtocolVersion {
		return &r, fmt.Errorf("protocol version %d, this helper speaks %d: build truce and truce-kyverno from the same commit", r.V, ProtocolVersion)
	}
	switch r.Op {
	case OpHello:
	case OpLoad:
		if r.Load == nil {
			return &r, errors.New("load: no load field")
		}
	case OpReview:
		if r.Review == nil {
			return &r, errors.New("review: no review field")
		}
		if r.Review.Set == "" || r.Review.Path == "" || len(r.Review.Review) == 0 {
			return &r, errors.New("review: set, path and review are required")
		}
	case OpUnload:
		if r.Set == "" {
			return &r, errors.New("unload: no set")
		}
	default:
		return &r, fmt.Errorf("unknown operation %q", r.Op)
	}
	return &r, nil
}
