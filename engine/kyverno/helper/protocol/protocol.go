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
const ProtocolVersion = 9

// CleanupServicePrefix prefixes the webhook paths of Kyverno's cleanup
// controller, a Service of its own (kyverno-cleanup-controller) whose
// paths ("/validate") collide with the admission controller's, in a
// ReviewRequest's Path (version 9).
const CleanupServicePrefix = "/kyverno-cleanup-controller"

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
	// OpGenerate runs Kyverno's background generate controller (version 3):
	// without a trigger it answers the policies' generate rules (what
	// triggers them, what they clone and generate); with one, the writes
	// the controller makes for it, as it makes them for an UpdateRequest.
	OpGenerate = "generate"
	// OpMutateExisting runs Kyverno's background mutate-existing processor
	// for MutatingPolicies with spec.evaluation.mutateExisting (version
	// 3) and its mutate-existing controller for ClusterPolicy/Policy rules
	// with mutate.targets (version 5): without a trigger it answers the
	// policies; with one, the updates of existing objects Kyverno makes
	// for the UpdateRequest an admission of the trigger creates.
	OpMutateExisting = "mutateExisting"
	// OpDeleting runs Kyverno's deleting controller for DeletingPolicies
	// (version 5) and its cleanup controller for the kyverno.io
	// ClusterCleanupPolicies and CleanupPolicies (version 7): without a
	// Policy it answers the policies (kinds, schedules); with one, the
	// objects the controller deletes when that policy's schedule comes.
	// truce decides when.
	OpDeleting = "deleting"
)

// Request is one line on the helper's standard input.
type Request struct {
	V      int            `json:"v"`
	ID     uint64         `json:"id"`
	Op     string         `json:"op"`
	Load   *LoadRequest   `json:"load,omitempty"`
	Review *ReviewRequest `json:"review,omitempty"`
	Set    string         `json:"set,omitempty"`
	// Generate is the body of OpGenerate, OpMutateExisting and OpDeleting.
	Generate *BackgroundRequest `json:"generate,omitempty"`
	// AdmissionPolicies is the body of OpAdmissionPolicies.
	AdmissionPolicies *AdmissionPoliciesRequest `json:"admissionPolicies,omitempty"`
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
	// ServerVersion (version 8) is the API server's version ("1.37.2"), as discovery
	// serves it: Kyverno's policy validation reads it.
	ServerVersion string `json:"serverVersion,omitempty"`
	// OpenAPI are the cluster's OpenAPI v3 documents by server path
	// ("api/v1", "apis/apps/v1"), gzipped JSON, as kube-apiserver serves
	// them under /openapi/v3: MutatingPolicies apply their
	// ApplyConfigurations with type converters built from them, and the
	// policy webhook type-checks validate.cel expressions against them.
	// Sent when the set holds MutatingPolicies, or for the policy webhook.
	OpenAPI map[string][]byte `json:"openAPI,omitempty"`
}

// ReviewRequest is an AdmissionReview sent to Path of a set.
type ReviewRequest struct {
	Set    string          `json:"set"`
	Path   string          `json:"path"`
	Review json.RawMessage `json:"review"`
}

// BackgroundRequest asks what Kyverno's background controller writes
// (generate, mutate existing). It is
// stateless: it carries the policies and the cluster state the controller
// reads, so truce decides when the controller acts (a trigger's admission,
// a change of a synchronized source or downstream object) and the helper
// only what it then writes.
type BackgroundRequest struct {
	// Policies are what the operation runs: for OpGenerate ClusterPolicies,
	// Policies (those without generate rules are ignored) and
	// GeneratingPolicies; for OpMutateExisting MutatingPolicies and
	// ClusterPolicies/Policies with mutate.targets; for OpDeleting
	// DeletingPolicies, the CEL PolicyExceptions and ClusterCleanupPolicies
	// and CleanupPolicies (cluster-wide and namespaced kinds throughout).
	Policies []json.RawMessage `json:"policies"`
	// Resources is the cluster's discovery: the generate controller maps
	// kinds to resources through it.
	Resources []*metav1.APIResourceList `json:"resources"`
	// Trigger is the object the UpdateRequest names; empty asks only for
	// the rules.
	Trigger json.RawMessage `json:"trigger,omitempty"`
	// Operation is the admission operation that made the UpdateRequest:
	// CREATE or UPDATE.
	Operation string `json:"operation,omitempty"`
	// NamespaceLabels are the labels of the trigger's namespace, for the
	// rules' namespaceSelectors.
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// Objects are the live objects the controller may read: clone
	// sources, existing downstream objects.
	Objects []json.RawMessage `json:"objects,omitempty"`
	// OpenAPI are the cluster's OpenAPI v3 documents, as in LoadRequest:
	// MutatingPolicies' ApplyConfigurations need them.
	OpenAPI map[string][]byte `json:"openAPI,omitempty"`
	// Policy and Rule, when set, restrict the run to one rule (the
	// UpdateRequest's rule context; for OpDeleting, the policy whose
	// schedule came). Policy is "name" or "namespace/name".
	Policy string `json:"policy,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// PolicyKind is, for OpDeleting, the kind of Policy (version 7):
	// DeletingPolicy, NamespacedDeletingPolicy, ClusterCleanupPolicy or
	// CleanupPolicy, since a DeletingPolicy and a ClusterCleanupPolicy
	// may share a name. Empty means a DeletingPolicy or
	// NamespacedDeletingPolicy.
	PolicyKind string `json:"policyKind,omitempty"`
}

// BackgroundRule is a generate rule as Kyverno's autogen computes the
// policy's rules, a GeneratingPolicy, or a MutatingPolicy that mutates
// existing objects.
type BackgroundRule struct {
	// Policy is "name" for a ClusterPolicy, "namespace/name" for a Policy.
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	// PolicyKind is the kind of an OpDeleting policy (version 7):
	// DeletingPolicy, NamespacedDeletingPolicy, ClusterCleanupPolicy or
	// CleanupPolicy.
	PolicyKind string `json:"policyKind,omitempty"`
	// Kinds are the kinds the rule matches (its triggers), as written in
	// the policy: "Namespace", "apps/v1/Deployment", "Pod/status".
	Kinds       []string `json:"kinds"`
	Synchronize bool     `json:"synchronize,omitempty"`
	// APIVersion and Kind are what the rule generates; Namespace and Name
	// may hold variables.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	// Clone is the source object of a clone rule ("namespace/name"),
	// CloneList the kinds a cloneList copies from CloneNamespace.
	Clone          string   `json:"clone,omitempty"`
	CloneList      []string `json:"cloneList,omitempty"`
	CloneNamespace string   `json:"cloneNamespace,omitempty"`
	// Targets are the kinds a mutate-existing policy mutates
	// ("group/version/Kind"; its targetMatchConstraints, else its
	// matchConstraints).
	Targets []string `json:"targets,omitempty"`
	// Schedule is a DeletingPolicy's or cleanup policy's cron schedule.
	Schedule string `json:"schedule,omitempty"`
	// CEL: the rule is a CEL policy (Rule is empty), whose CEL
	// generator may read any object: truce sends it every live object of
	// the kinds the cluster and repository hold.
	CEL bool `json:"cel,omitempty"`
	// Unpredictable names what the rule reads that truce cannot give
	// Kyverno offline (apiCall, imageRegistry, globalReference and
	// configMap context entries, foreach generation, the wall clock of a
	// deleting or cleanup policy's conditions); empty when it reads only
	// the trigger and the cluster objects sent.
	Unpredictable string `json:"unpredictable,omitempty"`
}

// Write is one write of Kyverno's background controller.
type Write struct {
	// Op is "create", "update" or "delete".
	Op     string          `json:"op"`
	Object json.RawMessage `json:"object"`
}

// BackgroundResponse is OpGenerate's answer.
type BackgroundResponse struct {
	Rules  []BackgroundRule `json:"rules,omitempty"`
	Writes []Write          `json:"writes,omitempty"`
	// Errors are the rules that failed for the trigger, as Kyverno fails
	// an UpdateRequest ("policy/rule: message").
	Errors []string `json:"errors,omitempty"`
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
	// Unpredictable (version 6) names, for a review, what Kyverno's
	// engines reached for that truce refuses offline (a registry, an
	// HTTP endpoint, a global context entry): "Kyverno KIND NAME …: …".
	// The review is Kyverno's answer as it is; truce reports these beside
	// it.
	Unpredictable []string `json:"unpredictable,omitempty"`
	// Generate
	Generate *BackgroundResponse `json:"generate,omitempty"`
	// AdmissionPolicies
	AdmissionPolicies *AdmissionPoliciesResponse `json:"admissionPolicies,omitempty"`
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
	case OpGenerate, OpMutateExisting, OpDeleting:
		if r.Generate == nil {
			return &r, fmt.Errorf("%s: no generate field", r.Op)
		}
		if len(r.Generate.Trigger) > 0 && r.Generate.Operation != "CREATE" && r.Generate.Operation != "UPDATE" {
			return &r, fmt.Errorf("%s: operation %q, want CREATE or UPDATE", r.Op, r.Generate.Operation)
		}
	case OpAdmissionPolicies:
		if r.AdmissionPolicies == nil {
			return &r, errors.New("admissionPolicies: no admissionPolicies field")
		}
	default:
		return &r, fmt.Errorf("unknown operation %q", r.Op)
	}
	return &r, nil
}
