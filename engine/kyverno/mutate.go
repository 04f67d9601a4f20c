package kyverno

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	"github.com/truce-dev/truce/simulate"
)

// mutateExistingDelay is how long after a trigger's admission Kyverno's
// background controller patches the targets: the UpdateRequest is
// queued and processed asynchronously, so the drift appears some time
// after a clean sync (the same default as a writers document's
// KyvernoMutateExisting).
const mutateExistingDelay = 10 * time.Second

// mutatesExisting reports whether a MutatingPolicy sets
// spec.evaluation.mutateExisting.enabled.
func mutatesExisting(o *unstructured.Unstructured) bool {
	on, _, _ := unstructured.NestedBool(o.Object, "spec", "evaluation", "mutateExisting", "enabled")
	return on
}

// mutateWriter is a MutatingPolicy with mutateExisting as Kyverno's
// background controller runs it. truce decides when: each admission of a
// trigger (a write that changes an object of its matchConstraints), which
// Kyverno's webhook turns into an UpdateRequest. What it patches, and
// whether the admission matches at all, is Kyverno's answer. Kyverno's own
// writes do not trigger it again (its background requests are skipped).
type mutateWriter struct {
	b    *background
	rule protocol.BackgroundRule
	// seen are the resourceVersions of triggers already processed (or
	// written by Kyverno), by UID.
	seen map[types.UID]string
}

var _ simulate.Writer = (*mutateWriter)(nil)

// Name implements simulate.Writer.
func (w *mutateWriter) Name() string { return BackgroundManager }

// Describe implements simulate.Writer.
func (w *mutateWriter) Describe() string {
	return fmt.Sprintf("%s mutates existing %s after each admission of a %s",
		mutateName(w.rule), trimKinds(w.rule.Targets), trimKinds(w.rule.Kinds))
}

// mutateName names a MutatingPolicy that mutates existing objects, or a
// ClusterPolicy/Policy rule with mutate.targets, in reports.
func mutateName(r protocol.BackgroundRule) string {
	if r.CEL {
		return "Kyverno MutatingPolicy " + r.Policy
	}
	return fmt.Sprintf("Kyverno mutate-existing rule %s of policy %s", r.Rule, r.Policy)
}

func trimKinds(kinds []string) string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = strings.TrimPrefix(k, "/")
	}
	return strings.Join(out, ", ")
}

// Delay implements simulate.Writer.
func (w *mutateWriter) Delay() time.Duration { return mutateExistingDelay }

// Watches implements simulate.Writer: the triggers' kinds.
func (w *mutateWriter) Watches(ref cluster.Ref) bool {
	for _, k := range w.rule.Kinds {
		s := parseKind(k)
		// A ClusterPolicy's kind without a group matches it in any group.
		if s.kind == ref.Kind && s.sub == "" && (s.group == ref.Group || (!w.rule.CEL && s.group == "" && s.version == "")) {
			return true
		}
	}
	return false
}

// Act implements simulate.Writer.
func (w *mutateWriter) Act(ctx context.Context, c cluster.Cluster) error {
	triggers, err := listTriggers(ctx, c, w.rule.Kinds, w.Describe())
	if err != nil {
		return err
	}
	for _, t := range triggers {
		prev, processed := w.seen[t.GetUID()]
		if processed && prev == t.GetResourceVersion() {
			continue
		}
		op := "UPDATE"
		if !processed {
			op = "CREATE"
		}
		// Read now: an earlier trigger's patches are what this one sees.
		objects, err := w.objects(ctx, c)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(t.Object)
		if err != nil {
			return err
		}
		resp, err := w.b.call(ctx, protocol.OpMutateExisting, &protocol.BackgroundRequest{Trigger: raw, Operation: op, Objects: objects, Policy: w.rule.Policy, Rule: w.rule.Rule})
		if err != nil {
			return fmt.Errorf("%s for %s: %w", w.Describe(), cluster.RefOf(t), err)
		}
		w.seen[t.GetUID()] = t.GetResourceVersion()
		w.b.failed(w.Describe(), resp.Errors)
		for _, wr := range resp.Writes {
			obj, err := applyWrite(ctx, c, wr, w.Describe())
			if err != nil {
				return err
			}
			if obj.GetUID() != "" {
				w.seen[obj.GetUID()] = obj.GetResourceVersion()
			}
		}
	}
	return nil
}

// failed keeps what Kyverno's controllers failed at for who as the
// engine's notes, and logs it when asked.
func (b *background) failed(who string, errs []string) {
	logErrors(who, errs)
	if b.notes != nil {
		b.notes.failures(who, errs)
	}
}

// logErrors shows the UpdateRequests Kyverno failed when its logs were
// asked for ($TRUCE_KYVERNO_LOG): the controller retries them, and the
// simulation, like the cluster, sees only what was written.
func logErrors(who string, errs []string) {
	if len(errs) == 0 || os.Getenv(LogEnv) == "" {
		return
	}
	for _, e := range errs {
		fmt.Fprintf(os.Stderr, "%s: %s\n", who, e)
	}
}

// objects are the live objects of the targets' kinds, which Kyverno's
// processor lists, and the Namespaces (a ClusterPolicy's
// namespaceSelector).
func (w *mutateWriter) objects(ctx context.Context, c cluster.Cluster) ([]json.RawMessage, error) {
	var all []*unstructured.Unstructured
	targets := w.rule.Targets
	if !w.rule.CEL {
		targets = append([]string{"/v1/Namespace"}, targets...)
	}
	for _, k := range targets {
		for _, gvk := range gvks(c.RESTMapper(), parseKind(k)) {
			objs, err := c.List(ctx, gvk, "")
			if err != nil {
				return nil, fmt.Errorf("listing %s, the targets of %s: %w", gvk.Kind, w.Describe(), err)
			}
			all = append(all, objs...)
		}
	}
	return rawObjects(all)
}
