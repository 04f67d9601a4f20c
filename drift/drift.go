// Package drift decides, for one object, whether what Git says and what the
// cluster stores differ, the way a GitOps tool decides it. Each tool's way is
// a Strategy: Argo CD's legacy three-way diff, Argo CD's server-side diff,
// Flux's server-side apply dry run, and truce's own prediction from the
// offline admission chain. Strategies use only cluster.Cluster.
package drift

import (
	"context"
	"github.com/truce-dev/truce/progress"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
)

// Strategy computes drift for one desired object as one GitOps tool does.
type Strategy interface {
	// Name is the strategy's name on the command line.
	Name() string
	// Diff compares desired (from Git) with the cluster.
	Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error)
}

// SyncStrategy is a Strategy whose answer for an object depends on the
// objects the tool applies before it in the same sync (the predicted
// strategy admits a Deployment after its Namespace).
type SyncStrategy interface {
	Strategy
	// DiffAll compares every object of one sync; the answers are in the
	// order of desired. An error about one object is an *ObjectError.
	// sink, when not nil, hears of each object compared. When ctx ends,
	// the objects not compared yet are NotCompared (see notCompared).
	DiffAll(ctx context.Context, desired []*unstructured.Unstructured, sink progress.Sink) ([]*Object, error)
}

// DiffAll compares every object of desired with s: as one sync when s is a
// SyncStrategy, one by one otherwise. The answers are in the order of
// desired.
//
// sink, when not nil, hears of each object compared. When ctx ends (a
// run's time limit), the objects not compared yet are Unpredictable, with
// a note saying why, and DiffAll returns what it finished without an
// error: the caller reports it.
func DiffAll(ctx context.Context, s Strategy, desired []*unstructured.Unstructured, sink progress.Sink) ([]*Object, error) {
	if ss, ok := s.(SyncStrategy); ok {
		return ss.DiffAll(ctx, desired, sink)
	}
	out := make([]*Object, len(desired))
	for i, d := range desired {
		if ctx.Err() != nil {
			return notCompared(s.Name(), desired, out), nil
		}
		o, err := s.Diff(ctx, d)
		if ctx.Err() != nil {
			// An answer given while the run ended may be the end's
			// doing (a webhook call cut short): not trusted.
			return notCompared(s.Name(), desired, out), nil
		}
		if err != nil {
			return nil, &ObjectError{Index: i, Err: err}
		}
		out[i] = o
		progress.Report(sink, progress.Event{Stage: progress.Diffing, Done: i + 1, Total: len(desired)})
	}
	return out, nil
}

// notCompared fills the answers out lacks: the run ended before those
// objects were compared.
func notCompared(strategy string, desired []*unstructured.Unstructured, out []*Object) []*Object {
	for i, o := range out {
		if o == nil {
			o = newObject(strategy, desired[i])
			o.Status = Unpredictable
			o.Notes = []string{"not compared: the run's time limit (--timeout) ran out first"}
			out[i] = o
		}
	}
	return out
}

// ObjectError is DiffAll's error about one object, desired[Index], so that
// the caller can name where that object comes from.
type ObjectError struct {
	Index int
	Err   error
}

func (e *ObjectError) Error() string { return e.Err.Error() }
func (e *ObjectError) Unwrap() error { return e.Err }

// Status is the outcome for one object.
type Status string

// Statuses.
const (
	// InSync: nothing to apply.
	InSync Status = "InSync"
	// Drifted: at least one field differs that no ignore rule covers.
	Drifted Status = "Drifted"
	// Missing: the object does not exist yet; applying creates it.
	Missing Status = "Missing"
	// Excluded: the tool skips the object (an exclusion annotation, or an
	// ignore rule for the whole document).
	Excluded Status = "Excluded"
	// Rejected: the server (or the offline chain) refuses the write.
	Rejected Status = "Rejected"
	// Unpredictable: not compared (the run's time limit ran out first).
	Unpredictable Status = "Unpredictable"
)

// Object is the drift of one object.
type Object struct {
	Source     string `json:"source,omitempty"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Strategy   string `json:"strategy"`
	Status     Status `json:"status"`
	// Fields are the fields that differ, ignored ones included (with
	// IgnoredBy set); Status is Drifted only for fields not ignored.
	Fields []Field `json:"fields"`
	// Desired and Live are the two documents the tool compares, normalised
	// as it normalises them (the unified diff is between these); Secret
	// values are masked.
	Desired map[string]any `json:"-"`
	Live    map[string]any `json:"-"`
	// Notes explain what the tool did or could not do for this object.
	Notes []string `json:"notes,omitempty"`
}

// Field is one field that differs.
type Field struct {
	// Pointer is a JSON pointer (RFC 6901) into the object.
	Pointer string `json:"pointer"`
	// Desired and Live are the values; absent on a side when the field is
	// not there.
	Desired any `json:"desired,omitempty"`
	Live    any `json:"live,omitempty"`
	// DesiredAbsent and LiveAbsent say the field is missing on that side.
	DesiredAbsent bool `json:"desiredAbsent,omitempty"`
	LiveAbsent    bool `json:"liveAbsent,omitempty"`
	// Origin names who wrote the live value: a field manager from
	// managedFields ("manager kube-controller-manager (Update)") or an
	// admission step ("MutatingAdmissionPolicy/mirror (binding mirror)").
	Origin string `json:"origin,omitempty"`
	// Steps are the admission steps of Origin as data (predicted drift).
	Steps []admission.Step `json:"-"`
	// IgnoredBy names the ignore rule that hides this difference.
	IgnoredBy string `json:"ignoredBy,omitempty"`
}

// Drifted reports whether any field differs that is not ignored.
func (o *Object) Drifted() bool { return o.Status == Drifted }

func newObject(strategy string, desired *unstructured.Unstructured) *Object {
	return &Object{
		APIVersion: desired.GetAPIVersion(),
		Kind:       desired.GetKind(),
		Namespace:  desired.GetNamespace(),
		Name:       desired.GetName(),
		Strategy:   strategy,
		Fields:     []Field{},
	}
}

// settle sets the status from the fields.
// finish completes a tool's comparison as every strategy reports it: each
// field's managers in live (nil: unknown), secret values masked, fields
// sorted, the status from the fields, and Drifted when the tool itself saw
// a difference (toolDrifted) that the field listing cannot place. It
// reports whether it took that last step.
func (o *Object) finish(live *unstructured.Unstructured, toolDrifted bool) (unplaced bool) {
	if live != nil {
		for i := range o.Fields {
			o.Fields[i].Origin = strings.Join(owners(live, o.Fields[i].Pointer), ", ")
		}
	}
	maskSecretFields(o)
	maskSecrets(o.Desired, o.Live)
	sortFields(o.Fields)
	o.settle()
	if toolDrifted && o.Status == InSync {
		o.Status = Drifted
		return true
	}
	return false
}

func (o *Object) settle() {
	o.Status = InSync
	for _, f := range o.Fields {
		if f.IgnoredBy == "" {
			o.Status = Drifted
			return
		}
	}
}
