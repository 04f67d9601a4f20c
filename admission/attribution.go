package admission

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	k8sadmission "k8s.io/apiserver/pkg/admission"
)

// recorder collects, for one write, what each admission step did: the
// snapshots before and after every mutating plugin, the audit annotations and
// the webhooks that could not be called.
type recorder struct {
	mu sync.Mutex
	// mutatingPolicies names the MutatingAdmissionPolicy bindings matching
	// the request, filled when that plugin changed the object.
	mutatingPolicies []Step
	steps            []step
	annotations      map[string]string
	unpredictable    []string
	// snapshot is a copy of snapshotOf as the last mutating plugin left it:
	// most plugins leave most objects alone, so one copy serves as the
	// "before" of every plugin until one of them changes the object.
	snapshot, snapshotOf runtime.Object
}

type step struct {
	plugin        string
	round         int
	before, after runtime.Object
}

type recorderKey struct{}

type builtinOnlyKey struct{}

// withBuiltinOnly marks a request that only the built-in mutating plugins
// see: used to give existing objects of the cluster state what those plugins
// added when the objects were created (a Pod's priority, say), without
// re-applying policies and webhooks that may not have existed then.
func withBuiltinOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, builtinOnlyKey{}, true)
}

func builtinOnly(ctx context.Context) bool {
	v, _ := ctx.Value(builtinOnlyKey{}).(bool)
	return v
}

func withRecorder(ctx context.Context, r *recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

func recorderFrom(ctx context.Context) *recorder {
	r, _ := ctx.Value(recorderKey{}).(*recorder)
	return r
}

func (r *recorder) addUnpredictable(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.unpredictable, what) {
		r.unpredictable = append(r.unpredictable, what)
	}
}

// attributionDecorator wraps each admission plugin so that a mutation can be
// attributed to the plugin that made it: it copies the object before the
// plugin runs and keeps both copies when the plugin changed it.
type attributionDecorator struct {
	mu      sync.Mutex
	plugins []k8sadmission.Interface
}

func (d *attributionDecorator) Decorate(handler k8sadmission.Interface, name string) k8sadmission.Interface {
	d.mu.Lock()
	d.plugins = append(d.plugins, handler)
	d.mu.Unlock()
	m, ok := handler.(k8sadmission.MutationInterface)
	if !ok {
		return handler
	}
	if v, ok := handler.(k8sadmission.ValidationInterface); ok {
		return &attributedMutatingValidator{attributedMutator{m, name}, v}
	}
	return &attributedMutator{m, name}
}

// waitForReady blocks until every plugin that tracks readiness (policy and
// webhook plugins wait for informers and compiled policies) is ready.
func (d *attributionDecorator) waitForReady() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.plugins {
		if w, ok := p.(interface{ WaitForReady() bool }); ok && !w.WaitForReady() {
			return false
		}
	}
	return true
}

type attributedMutator struct {
	k8sadmission.MutationInterface
	name string
}

func (a *attributedMutator) Admit(ctx context.Context, attrs k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) error {
	if builtinOnly(ctx) && (a.name == "MutatingAdmissionPolicy" || a.name == "MutatingAdmissionWebhook") {
		return nil
	}
	rec := recorderFrom(ctx)
	obj := attrs.GetObject()
	if rec == nil || obj == nil || !a.Handles(attrs.GetOperation()) {
		return a.MutationInterface.Admit(ctx, attrs, o)
	}
	before := rec.before(obj)
	err := a.MutationInterface.Admit(ctx, attrs, o)
	// reflect.DeepEqual is several times cheaper than semantic equality; a
	// difference only in how a quantity is cached is dropped later, when
	// the snapshots are diffed as JSON.
	if after := attrs.GetObject(); after != nil && !reflect.DeepEqual(before, after) {
		round := 0
		if attrs.GetReinvocationContext().IsReinvoke() {
			round = 1
		}
		rec.changed(step{plugin: a.name, round: round, before: before, after: after.DeepCopyObject()}, after)
	}
	return err
}

// before returns a copy of obj as it is now, the snapshot when it is of obj
// (no plugin changed obj since the snapshot was taken: each change is
// recorded with a new one).
func (r *recorder) before(obj runtime.Object) runtime.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snapshotOf != obj || r.snapshot == nil {
		r.snapshot, r.snapshotOf = obj.DeepCopyObject(), obj
	}
	return r.snapshot
}

// changed records a step that changed obj; its after copy is the snapshot
// of obj from now on. Steps share snapshots and must not change them.
func (r *recorder) changed(s step, obj runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
	r.snapshot, r.snapshotOf = s.after, obj
}

type attributedMutatingValidator struct {
	attributedMutator
	v k8sadmission.ValidationInterface
}

func (a *attributedMutatingValidator) Validate(ctx context.Context, attrs k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) error {
	return a.v.Validate(ctx, attrs, o)
}
