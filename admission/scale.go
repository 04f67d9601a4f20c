package admission

import (
	"context"
	"errors"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// ScaleRequest is kubectl scale: a merge patch of the replicas of a
// workload's scale subresource.
type ScaleRequest struct {
	GroupVersionKind k8sschema.GroupVersionKind
	Namespace, Name  string
	Replicas         int32
	FieldManager     string
	User             string
	Groups           []string
	Persist          bool
}

// AdmitScale runs kubectl scale's request.
func (c *Chain) AdmitScale(ctx context.Context, req ScaleRequest) (*Result, error) {
	return nil, errors.New("scale: not implemented")
}
