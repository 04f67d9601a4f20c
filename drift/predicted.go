package drift

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
)

// Admitter runs a write through the offline admission chain without
// storing it; cluster/memory implements it.
type Admitter interface {
	Admit(ctx context.Context, req admission.Request) (*admission.Result, error)
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
}

// Name implements Strategy.
func (p *Predicted) Name() string { return "predicted" }

// Diff implements Strategy.
func (p *Predicted) Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error) {
	out := newObject(p.Name(), desired)
	manager := p.FieldManager
	if manager == "" {
		manager = admission.DefaultFieldManager
	}
	res, err := p.Admitter.Admit(ctx, admission.Request{Object: desired.DeepCopy(), FieldManager: manager, Apply: true, Force: true})
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
	out.Fields = setFieldsBetween(out.Desired, gitView(res.Object))
	// Only what Git sets is compared; the rest of the stored object would
	// make the diff unreadable.
	out.Live, _ = project(gitView(res.Object), out.Desired).(map[string]any)
	for i := range out.Fields {
		out.Fields[i].Origin = changeOrigin(res.Changes, out.Fields[i].Pointer)
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
func changeOrigin(changes []admission.Change, pointer string) string {
	var by []string
	seen := map[string]bool{}
	for _, c := range changes {
		if c.Path == pointer || strings.HasPrefix(pointer, c.Path+"/") || strings.HasPrefix(c.Path, pointer+"/") {
			if !seen[c.By] {
				seen[c.By] = true
				by = append(by, c.By)
			}
		}
	}
	return strings.Join(by, ", ")
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
