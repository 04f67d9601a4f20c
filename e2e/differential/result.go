package differential

import (
	"encoding/json"
	"fmt"

	"github.com/truce-dev/truce/e2e/apiserver"
)

// Output is the JSON document `truce admit -o json` prints, and the one the
// runner prints for the server in server-only mode.
type Output struct {
	Results []Result `json:"results"`
}

// Result is the outcome of one write. Exit codes of `truce admit`: 0 when
// every write was admitted, 1 when one was denied, 2 on error.
type Result struct {
	Source     string `json:"source"`
	Operation  string `json:"operation"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Allowed    bool   `json:"allowed"`
	// Code, Reason (a metav1.StatusReason) and Message are the denial's;
	// 0 and empty when allowed.
	Code             int32             `json:"code"`
	Reason           string            `json:"reason"`
	Message          string            `json:"message"`
	Warnings         []string          `json:"warnings"`
	AuditAnnotations map[string]string `json:"auditAnnotations"`
	// Object is what would be stored; null when denied.
	Object map[string]any `json:"object"`
	// Changes say which admission step changed what (truce only; the
	// server does not tell).
	Changes []Change `json:"changes,omitempty"`
	// Unpredictable names the webhooks truce could not call offline (it
	// applied their failurePolicy); truce only.
	Unpredictable []string `json:"unpredictable,omitempty"`
}

// Change is one field changed by admission.
type Change struct {
	Path  string `json:"path"`
	By    string `json:"by"`
	Round int    `json:"round"`
}

// ServerResult renders a server dry-run answer in truce's contract.
func ServerResult(c *Case, res *apiserver.DryRunResult, auditAnnotations map[string]string) Result {
	w := c.Write.Object
	r := Result{
		Source:           c.Write.Source,
		Operation:        string(res.Operation),
		APIVersion:       w.GetAPIVersion(),
		Kind:             w.GetKind(),
		Namespace:        w.GetNamespace(),
		Name:             w.GetName(),
		Allowed:          res.Allowed(),
		Warnings:         append([]string{}, res.Warnings...),
		AuditAnnotations: auditAnnotations,
	}
	if res.Object != nil {
		r.Namespace = res.Object.GetNamespace()
		r.Object = res.Object.Object
	}
	if res.Status != nil {
		st := res.Status.ErrStatus
		r.Code, r.Reason, r.Message = st.Code, string(st.Reason), st.Message
	}
	return r
}

// ParseOutput decodes truce's JSON output.
func ParseOutput(data []byte) (*Output, error) {
	var out Output
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decode truce output: %w", err)
	}
	return &out, nil
}
