package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
)

// observable is implemented by clusters that show the admission result of
// each write (cluster/memory).
type observable interface {
	Observe(func(admission.Request, *admission.Result))
}

// recorder is the cluster every actor of a run writes through: it logs
// each write that is not a dry run with the actor, the virtual time, the
// fields it changed and the admission steps that changed the request.
type recorder struct {
	cluster.Cluster
	now   time.Duration
	actor string
	// member is the index of the world's member writing, -1 for other
	// writers.
	member int
	writes []Write
	// changed collects the objects whose stored state changed since the
	// engine last looked.
	changed []cluster.Ref
	// admitted is the last admission result the cluster showed.
	admitted *admission.Result
}

func newRecorder(c cluster.Cluster) *recorder {
	r := &recorder{Cluster: c, member: -1}
	if o, ok := c.(observable); ok {
		o.Observe(func(_ admission.Request, res *admission.Result) { r.admitted = res })
	}
	return r
}

// as runs fn with the writes it makes attributed to actor, the world's
// member-th tool (-1 for another writer).
func (r *recorder) as(actor string, member int, fn func() error) error {
	prevActor, prevMember := r.actor, r.member
	r.actor, r.member = actor, member
	defer func() { r.actor, r.member = prevActor, prevMember }()
	return fn()
}

// Unwrap returns the cluster the recorder writes to, whose types the
// tools' comparisons read.
func (r *recorder) Unwrap() cluster.Cluster { return r.Cluster }

func (r *recorder) takeChanged() []cluster.Ref {
	out := r.changed
	r.changed = nil
	return out
}

func (r *recorder) Create(ctx context.Context, obj *unstructured.Unstructured, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	if opts.DryRun {
		return r.Cluster.Create(ctx, obj, opts)
	}
	return r.record(ctx, "create", cluster.RefOf(obj), func() (*unstructured.Unstructured, error) { return r.Cluster.Create(ctx, obj, opts) })
}

func (r *recorder) Update(ctx context.Context, obj *unstructured.Unstructured, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	if opts.DryRun {
		return r.Cluster.Update(ctx, obj, opts)
	}
	return r.record(ctx, "update", cluster.RefOf(obj), func() (*unstructured.Unstructured, error) { return r.Cluster.Update(ctx, obj, opts) })
}

func (r *recorder) Apply(ctx context.Context, obj *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, error) {
	if opts.DryRun {
		return r.Cluster.Apply(ctx, obj, opts)
	}
	return r.record(ctx, "apply", cluster.RefOf(obj), func() (*unstructured.Unstructured, error) { return r.Cluster.Apply(ctx, obj, opts) })
}

func (r *recorder) Patch(ctx context.Context, ref cluster.Ref, pt types.PatchType, patch []byte, opts cluster.WriteOptions) (*unstructured.Unstructured, error) {
	if opts.DryRun {
		return r.Cluster.Patch(ctx, ref, pt, patch, opts)
	}
	return r.record(ctx, "patch", ref, func() (*unstructured.Unstructured, error) { return r.Cluster.Patch(ctx, ref, pt, patch, opts) })
}

func (r *recorder) Delete(ctx context.Context, ref cluster.Ref, opts cluster.DeleteOptions) error {
	if opts.DryRun {
		return r.Cluster.Delete(ctx, ref, opts)
	}
	w := Write{At: r.now, Writer: r.actor, member: r.member, Verb: "delete", Ref: ref}
	err := r.Cluster.Delete(ctx, ref, opts)
	if err != nil {
		w.Error = err.Error()
	} else {
		w.Changed = true
		r.changed = append(r.changed, ref)
	}
	r.writes = append(r.writes, w)
	return err
}

func (r *recorder) record(ctx context.Context, verb string, ref cluster.Ref, write func() (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	if ref.Namespace == "" && namespaced(r.RESTMapper(), ref.GroupVersionKind) {
		ref.Namespace = "default"
	}
	before, err := r.Cluster.Get(ctx, ref)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading %s before writing it: %w", ref, err)
	}
	if err != nil {
		before = nil
	}
	if verb == "apply" && before == nil {
		verb = "apply (create)"
	}
	r.admitted = nil
	after, werr := write()
	w := Write{At: r.now, Writer: r.actor, member: r.member, Verb: verb, Ref: ref}
	if res := r.admitted; res != nil {
		w.Admission = admissionSteps(res)
		w.Unpredictable = res.Unpredictable
	}
	if werr != nil {
		w.Error = werr.Error()
		r.writes = append(r.writes, w)
		return nil, werr
	}
	w.Changed = before == nil || before.GetResourceVersion() != after.GetResourceVersion()
	if w.Changed {
		if before == nil {
			w.Fields = createdFields(after)
		} else {
			w.Fields = drift.FieldsBetween(content(before), content(after))
		}
		r.changed = append(r.changed, ref)
	}
	r.writes = append(r.writes, w)
	return after, nil
}

// createdFields names the fields a create changed, as
// drift.FieldsBetween(nil, content(after)) does (the object's top-level
// fields), without their values: each would hold a copy of the object for
// every create of the run (most of the log's memory), and only a create's
// field names are read.
func createdFields(after *unstructured.Unstructured) []drift.Field {
	names := make(map[string]any, len(after.Object))
	for k := range after.Object {
		names[k] = true
	}
	fields := drift.FieldsBetween(nil, names)
	for i := range fields {
		fields[i].Live = nil
	}
	return fields
}

// admissionSteps lists the steps that changed the request and the fields
// each changed.
func admissionSteps(res *admission.Result) []StepChange {
	var out []StepChange
	index := map[string]int{}
	for _, c := range res.Changes {
		// Changes are admission's only: the object that enters admission
		// is already defaulted.
		i, ok := index[c.By]
		if !ok {
			i = len(out)
			index[c.By] = i
			out = append(out, StepChange{By: c.By, Step: c.Step})
		}
		if !slices.Contains(out[i].Fields, c.Path) {
			out[i].Fields = append(out[i].Fields, c.Path)
		}
	}
	return out
}

// content is what a write can change that a reader cares about: the
// object without the bookkeeping the server updates on every write.
func content(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	c.SetManagedFields(nil)
	c.SetResourceVersion("")
	c.SetGeneration(0)
	c.SetUID("")
	c.SetCreationTimestamp(metav1.Time{})
	return c.Object
}

func namespaced(m meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && mapping.Scope.Name() == meta.RESTScopeNameNamespace
}

func sortRefs(refs []cluster.Ref) {
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
}

// view is the log as the world's member-th result shows it: its own
// writes are the tool's, the other members' are another writer's, named by
// their unit. With own (the member's objects: those of its Git; nil keeps
// every write), it keeps just the writes to those and to the objects it
// pruned, up to the end of its simulated time, so that a result of a world
// does not carry the others'.
func (r *recorder) view(member int, members []Member, res *Result, own map[cluster.Ref]bool) []Write {
	only := own != nil
	if only {
		for _, round := range res.Rounds {
			for _, ref := range round.Pruned {
				own[ref] = true
			}
		}
	}
	out := make([]Write, 0, len(r.writes))
	for _, w := range r.writes {
		if only && (!own[w.Ref] || w.At > res.Simulated) {
			continue
		}
		w.ByTool = w.member == member
		if w.member >= 0 && w.member != member && members[w.member].Label != "" {
			w.Writer = fmt.Sprintf("%s (%s)", w.Writer, members[w.member].Label)
		}
		out = append(out, w)
	}
	return out
}
