package simulate

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BackgroundEngine is a policy engine whose background controllers write
// beside the GitOps tools (Kyverno's generate controller): the writers
// come from the engine's policies among the cluster's objects, not from a
// writers document.
type BackgroundEngine interface {
	Background(ctx context.Context, objs []*unstructured.Unstructured) (Background, error)
}

// Background is what an engine's background controllers do for one set
// of policies.
type Background interface {
	// Writers returns fresh writers for one run (writers keep state).
	Writers() []Writer
	// Unpredictable names the rules whose writes cannot be predicted
	// offline (they read external data), and why; they get no writer.
	Unpredictable() []string
}
