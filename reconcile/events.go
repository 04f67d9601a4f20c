package reconcile

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/truce-dev/truce/cluster"
)

// ClusterRecorder writes core/v1 Events through a Cluster, so kubectl
// describe and kubectl get events show what the reconciler did to an
// object. Writing an event is best effort: a failure is logged by the
// caller's OnError, never fails a pass.
type ClusterRecorder struct {
	Cluster cluster.Cluster
	// Namespace receives events about cluster-scoped objects.
	Namespace string
	// Component is the event source ("truce-sync").
	Component string
	// Timeout bounds one write; zero means 5 seconds.
	Timeout time.Duration
	OnError func(error)

	seq atomic.Int64
}

// Event implements Recorder.
func (r *ClusterRecorder) Event(ref cluster.Ref, kind, reason, message string) {
	ns := ref.Namespace
	if ns == "" {
		ns = r.Namespace
	}
	now := time.Now().UTC()
	name := fmt.Sprintf("%s.%x%x", ref.Name, now.UnixNano(), r.seq.Add(1))
	if len(name) > validation.DNS1123SubdomainMaxLength {
		name = name[len(name)-validation.DNS1123SubdomainMaxLength:]
	}
	if len(message) > 1024 {
		message = message[:1021] + "..."
	}
	ev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"involvedObject": map[string]any{
			"apiVersion": ref.GroupVersion().String(), "kind": ref.Kind,
			"namespace": ref.Namespace, "name": ref.Name,
		},
		"type": kind, "reason": reason, "message": message,
		"source":         map[string]any{"component": r.Component},
		"firstTimestamp": now.Format(time.RFC3339), "lastTimestamp": now.Format(time.RFC3339),
		"count":              int64(1),
		"reportingComponent": r.Component,
	}}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := r.Cluster.Create(ctx, ev, cluster.WriteOptions{FieldManager: r.Component}); err != nil && r.OnError != nil {
		r.OnError(fmt.Errorf("recording event %s on %s: %w", reason, ref, err))
	}
}
