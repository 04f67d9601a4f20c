package admission

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Operation is the kind of write, as the AdmissionReview names it.
type Operation string

// The operations of admission. truce admits creates and updates (Admit),
// deletes (AdmitDelete), and reviews of any (Mutate, Validate).
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Request is one write: the object a client sends (a PUT for an update).
type Request struct {
	// Source says where the object came from ("file:line"); it is copied to
	// the result and used in errors.
	Source string
	// Object is the body of the write as the client sends it.
	Object *unstructured.Unstructured
	// User and Groups are the identity of the writer. Empty User means the
	// cluster admin (system:admin in system:masters), as with an admin
	// kubeconfig.
	User   string
	Groups []string
	// FieldManager names the writer in managedFields; empty means
	// DefaultFieldManager. A server-side apply needs one.
	FieldManager string
	// Apply makes Object a server-side apply configuration (a PATCH of type
	// application/apply-patch+yaml): it is merged into the existing object by
	// field ownership. Force takes over fields other managers own instead of
	// answering 409 Conflict.
	Apply bool
	Force bool
	// PatchType and Patch make the write a PATCH (kubectl patch, and the
	// patch kubectl apply computes on the client) of the stored object
	// that Object names: only Object's apiVersion, kind, namespace and
	// name are read. The server applies the patch to the stored object
	// before admission; a patch of an object that does not exist is
	// answered 404. PatchType is strategic, merge or json (the apply
	// patch type is Apply).
	PatchType types.PatchType
	Patch     []byte
	// Persist tells admission the write is stored: dryRun is false, so
	// webhooks with side effects are called. Admit itself never stores;
	// Commit does.
	Persist bool
}

// Change is one field that admission changed between what the client sent
// (after decoding and defaulting) and what would be stored.
type Change struct {
	// Path is a JSON pointer (RFC 6901) into the stored object.
	Path string `json:"path"`
	// By is Step's text: an admission plugin's name,
	// "MutatingAdmissionPolicy/NAME (binding B)" or "webhook NAME".
	By string `json:"by"`
	// Round is 0 for the first pass of mutating admission, 1 for reinvocation.
	Round int `json:"round"`
	// Step is the admission step that made the change.
	Step Step `json:"step"`
}

// Result is the outcome of one write: what kube-apiserver would answer.
type Result struct {
	Source     string    `json:"source"`
	Operation  Operation `json:"operation"`
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	Allowed    bool      `json:"allowed"`
	// Code, Reason and Message are the HTTP status code, the metav1 status
	// reason and the message of a rejection; zero when allowed.
	Code    int32  `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Details are the status details of a rejection (the conflicting
	// fields of an apply, the causes of an Invalid), for callers that
	// rebuild the API error; not part of truce admit's output.
	Details          *metav1.StatusDetails `json:"-"`
	Warnings         []string              `json:"warnings"`
	AuditAnnotations map[string]string     `json:"auditAnnotations"`
	// Object is the object the server would store; nil when denied. For
	// a write through a subresource it is what the server answers (the
	// Scale), and Stored the object it stores.
	Object  map[string]any `json:"object,omitempty"`
	Stored  map[string]any `json:"-"`
	Changes []Change       `json:"changes"`
	// Unpredictable lists webhooks that could not be called offline; the
	// result applied their failurePolicy, which a live cluster may not.
	Unpredictable []string `json:"unpredictable,omitempty"`
	// Notes are caveats about how exact this result is.
	Notes []string `json:"notes,omitempty"`
}
