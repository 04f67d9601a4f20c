package drift

import (
	"context"
	"fmt"
	"github.com/truce-dev/truce/progress"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
)

// Admitter is the offline admission chain with its cluster;
// cluster/memory implements it.
type Admitter interface {
	// Admit runs a write through admission without storing it.
	Admit(ctx context.Context, req admission.Request) (*admission.Result, error)
	// Apply admits and stores a server-side apply: DiffAll keeps each
	// object of a sync, so that the objects after it see it.
	Apply(ctx context.Context, obj *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, error)
}

// Predicted compares Git with the object the offline admission chain
// predicts the server will store for it, on the fields Git sets: what any
// GitOps tool will see right after it applies the manifest. It makes no API
// call.
type Predicted struct {
	Admitter Admitter
	// FieldManager is the applier; it matters for conflicts with other
	// owners of existing objects.
	FieldManager string
	// Order is how the GitOps tool sequences a sync, for DiffAll; nil is
	// Argo CD's (ArgoSyncOrder).
	Order Order
}

var _ SyncStrategy = (*Predicted)(nil)

// Name implements Strategy.
func (p *Predicted) Name() string { return "predicted" }

func (p *Predicted) manager() string {
	if p.FieldManager == "" {
		return admission.DefaultFieldManager
	}
	return p.FieldManager
}

// DiffAll implements SyncStrategy: desired is one sync, admitted stage by
// stage in the tool's order, each stage against the cluster as the
// earlier ones left it, so that the repository's own Namespaces, CRDs and
// admission configuration are in place for the objects applied after
// them. Every admitted object is stored in the Admitter's cluster: give it
// a cluster made for this comparison.
func (p *Predicted) DiffAll(ctx context.Context, desired []*unstructured.Unstructured, sink progress.Sink) ([]*Object, error) {
	order := p.Order
	if order == nil {
		order = ArgoSyncOrder
	}
	out := make([]*Object, len(desired))
	done := 0
	for _, stage := range order(desired) {
		for _, i := range stage {
			if ctx.Err() != nil {
				return notCompared(p.Name(), desired, out), nil
			}
			o, err := p.Diff(ctx, desired[i])
			if ctx.Err() != nil {
				// An answer given while the run ended may be the end's
				// doing (a webhook call cut short): not trusted.
				return notCompared(p.Name(), desired, out), nil
			}
			if err != nil {
				return nil, &ObjectError{Index: i, Err: err}
			}
			out[i] = o
			done++
			progress.Report(sink, progress.Event{Stage: progress.Diffing, Done: done, Total: len(desired)})
		}
		for _, i := range stage {
			if out[i].Status == Rejected {
				continue
			}
			opts := cluster.ApplyOptions{FieldManager: p.manager(), Force: true}
			if _, err := p.Admitter.Apply(ctx, desired[i].DeepCopy(), opts); err != nil {
				if ctx.Err() != nil {
					return notCompared(p.Name(), desired, out), nil
				}
				return nil, &ObjectError{Index: i, Err: fmt.Errorf("storing %s for the objects applied after it: %w", cluster.RefOf(desired[i]), err)}
			}
		}
	}
	for i, o := range out {
		if o == nil {
			return nil, &ObjectError{Index: i, Err: fmt.Errorf("the sync order left out %s", cluster.RefOf(desired[i]))}
		}
	}
	return out, nil
}

// Diff implements Strategy: desired alone, against the cluster as it is.
func (p *Predicted) Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error) {
	out := newObject(p.Name(), desired)
	res, err := p.Admitter.Admit(ctx, admission.Request{Object: desired.DeepCopy(), FieldManager: p.manager(), Apply: true, Force: true})
	if err != nil {
		return nil, fmt.Errorf("predicting %s: %w", cluster.RefOf(desired), err)
	}
	if !res.Allowed {
		out.Status = Rejected
		out.Notes = append(out.Notes, fmt.Sprintf("rejected (%d %s): %s", res.Code, res.Reason, res.Message))
		return out, nil
	}
	if len(res.Unpredictable) > 0 {
		out.Notes = append(out.Notes, "webhooks not called offline: "+strings.Join(res.Unpredictable, ", "))
	}
	out.Desired = gitView(desired.Object)
	stored := gitView(res.Object)
	out.Fields = setFieldsBetween(out.Desired, stored)
	// Only what Git sets is compared; the rest of the stored object would
	// make the diff unreadable.
	out.Live, _ = project(stored, out.Desired).(map[string]any)
	for i := range out.Fields {
		out.Fields[i].Origin, out.Fields[i].Steps = changeOrigin(res.Changes, out.Fields[i].Pointer)
	}
	maskSecretFields(out)
	maskSecrets(out.Desired, out.Live)
	out.settle()
	return out, nil
}

// gitView drops what no manifest sets: status and server-owned metadata.
func gitView(obj map[string]any) map[string]any {
	u := (&unstructured.Unstructured{Object: obj}).DeepCopy()
	delete(u.Object, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	return u.Object
}

// setFieldsBetween lists the fields desired sets whose value in live
// differs: leaves of desired, and lists desired sets whose length changed
// (compared whole). Fields only live has are not drift.
func setFieldsBetween(desired, live map[string]any) []Field {
	var out []Field
	for _, f := range FieldsBetween(desired, live) {
		if !f.DesiredAbsent {
			out = append(out, f)
		}
	}
	return out
}

// changeOrigin names the admission steps that changed pointer, a parent or
// a child of it.
func changeOrigin(changes []admission.Change, pointer string) (string, []admission.Step) {
	var by []string
	var steps []admission.Step
	seen := map[string]bool{}
	for _, c := range changes {
		if c.Path == pointer || strings.HasPrefix(pointer, c.Path+"/") || strings.HasPrefix(c.Path, pointer+"/") {
			if !seen[c.By] {
				seen[c.By] = true
				by = append(by, c.By)
				steps = append(steps, c.Step)
			}
		}
	}
	return strings.Join(by, ", "), steps
}

// project keeps of v what shape sets: map keys shape has, list items
// element-wise when the lengths agree, else v's list whole.
func project(v, shape any) any {
	switch sv := shape.(type) {
	case map[string]any:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := map[string]any{}
		for k, child := range sv {
			if x, ok := m[k]; ok {
				out[k] = project(x, child)
			}
		}
		return out
	case []any:
		l, ok := v.([]any)
		if !ok || len(l) != len(sv) {
			return v
		}
		out := make([]any, len(l))
		for i := range l {
			out[i] = project(l[i], sv[i])
		}
		return out
	}
	return v
}
