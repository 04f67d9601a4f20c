package kyverno

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aptible/supercronic/cronexpr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	"github.com/truce-dev/truce/simulate"
)

// CleanupManager is who makes a DeletingPolicy's or cleanup policy's
// deletes: Kyverno's cleanup controller, which runs its deleting
// controller and its cleanup controller.
const CleanupManager = "kyverno-cleanup-controller"

// deletingPolicyKinds are the kinds Kyverno's cleanup controller runs on
// their schedules: the CEL DeletingPolicies and the kyverno.io cleanup
// policies they replace. They never answer admission.
var deletingPolicyKinds = map[k8sschema.GroupKind]bool{
	{Group: GroupCEL, Kind: "DeletingPolicy"}:           true,
	{Group: GroupCEL, Kind: "NamespacedDeletingPolicy"}: true,
	{Group: GroupLegacy, Kind: "ClusterCleanupPolicy"}:  true,
	{Group: GroupLegacy, Kind: "CleanupPolicy"}:         true,
}

// deleteWriter is a DeletingPolicy as Kyverno's deleting controller runs
// it, or a ClusterCleanupPolicy or CleanupPolicy as its cleanup controller
// runs it. truce decides when: at each time of the policy's cron schedule,
// read with the parser Kyverno reads it with (supercronic's cronexpr,
// through the policy's GetExecutionTime), from simulate.Epoch. Which
// objects it deletes then is Kyverno's answer: the helper runs the
// controller over the live objects.
type deleteWriter struct {
	b        *background
	rule     protocol.BackgroundRule
	schedule *cronexpr.Expression
}

var _ simulate.Writer = (*deleteWriter)(nil)

// Name implements simulate.Writer.
func (w *deleteWriter) Name() string { return CleanupManager }

// Describe implements simulate.Writer.
func (w *deleteWriter) Describe() string {
	return fmt.Sprintf("Kyverno %s deletes the %s it matches on its schedule %q",
		deletingName(w.rule), trimKinds(w.rule.Kinds), w.rule.Schedule)
}

// deletingName names a DeletingPolicy or cleanup policy in reports.
func deletingName(r protocol.BackgroundRule) string {
	switch {
	case r.PolicyKind != "":
		return r.PolicyKind + " " + r.Policy
	case strings.Contains(r.Policy, "/"):
		return "NamespacedDeletingPolicy " + r.Policy
	}
	return "DeletingPolicy " + r.Policy
}

// Watches implements simulate.Writer: the controller acts on its
// schedule, not on changes.
func (w *deleteWriter) Watches(cluster.Ref) bool { return false }

// Delay implements simulate.Writer.
func (w *deleteWriter) Delay() time.Duration { return 0 }

// Next implements the simulation's scheduled writer: the schedule's first
// time after after. Kyverno computes the next execution from the last one
// (status.lastExecutionTime) the same way.
func (w *deleteWriter) Next(after time.Duration) (time.Duration, bool) {
	t := w.schedule.Next(simulate.Epoch.Add(after))
	if t.IsZero() {
		return 0, false
	}
	return t.Sub(simulate.Epoch), true
}

// Act implements simulate.Writer.
func (w *deleteWriter) Act(ctx context.Context, c cluster.Cluster) error {
	objects, err := w.objects(ctx, c)
	if err != nil {
		return err
	}
	resp, err := w.b.call(ctx, protocol.OpDeleting, &protocol.BackgroundRequest{Objects: objects, Policy: w.rule.Policy, PolicyKind: w.rule.PolicyKind})
	if err != nil {
		return fmt.Errorf("%s: %w", w.Describe(), err)
	}
	w.b.failed(w.Describe(), resp.Errors)
	for _, wr := range resp.Writes {
		if wr.Op != "delete" {
			return fmt.Errorf("%s: the helper answered a write %q", w.Describe(), wr.Op)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(wr.Object); err != nil {
			return fmt.Errorf("decoding a delete of %s: %w", w.Describe(), err)
		}
		ref := cluster.RefOf(obj)
		err := c.Delete(ctx, ref, cluster.DeleteOptions{})
		var status apierrors.APIStatus
		if err != nil && !errors.As(err, &status) {
			return fmt.Errorf("%s: delete %s: %w", w.Describe(), ref, err)
		}
		// The API server refusing the delete is what Kyverno meets too:
		// it records the failure and tries again at the next time.
	}
	return nil
}

// objects are what the controller reads: every live object of the kinds
// the cluster and repository hold (the policy's CEL may read any of them
// through its resource library), of the kinds it matches, and the
// Namespaces its namespaceSelector reads.
func (w *deleteWriter) objects(ctx context.Context, c cluster.Cluster) ([]json.RawMessage, error) {
	seen := map[k8sschema.GroupVersionKind]bool{}
	var all []*unstructured.Unstructured
	list := func(gvk k8sschema.GroupVersionKind) error {
		if seen[gvk] {
			return nil
		}
		seen[gvk] = true
		objs, err := c.List(ctx, gvk, "")
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("listing %s for %s: %w", gvk.Kind, w.Describe(), err)
		}
		all = append(all, objs...)
		return nil
	}
	kinds := append([]k8sschema.GroupVersionKind{{Version: "v1", Kind: "Namespace"}}, w.b.kinds...)
	for _, k := range w.rule.Kinds {
		kinds = append(kinds, gvks(c.RESTMapper(), parseKind(k))...)
	}
	for _, k := range kinds {
		if err := list(k); err != nil {
			return nil, err
		}
	}
	return rawObjects(all)
}

// deletingWriters are the writers of the predictable DeletingPolicies;
// a schedule that does not parse is reported with the unpredictable ones
// (Kyverno's controller fails on it each time).
func (b *background) deletingWriters() ([]simulate.Writer, []string) {
	var out []simulate.Writer
	var bad []string
	for _, r := range b.deleting {
		if r.Unpredictable != "" {
			continue
		}
		expr, err := cronexpr.Parse(r.Schedule)
		if err != nil {
			bad = append(bad, fmt.Sprintf("Kyverno %s: schedule %q: %v", deletingName(r), r.Schedule, err))
			continue
		}
		out = append(out, &deleteWriter{b: b, rule: r, schedule: expr})
	}
	return out, bad
}
