package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

// Reconciler applies a Source to a Cluster. Reconcile is one pass; the
// Reconciler keeps the loop breaker's memory between passes, so use one
// Reconciler per sync for the life of the process. Passes must not overlap.
type Reconciler struct {
	cluster   cluster.Cluster
	source    Source
	store     Store
	opts      Options
	rules     *ignore.Set
	recorder  Recorder
	metrics   Metrics
	predictor Predictor
	admission AdmissionView
	now       func() time.Time
	log       *slog.Logger

	mu      sync.Mutex
	history map[fieldKey]*fieldHistory
}

// Option sets an optional collaborator of a Reconciler.
type Option func(*Reconciler)

// WithRecorder sends events to rec.
func WithRecorder(rec Recorder) Option { return func(r *Reconciler) { r.recorder = rec } }

// WithMetrics counts passes and contests in m.
func WithMetrics(m Metrics) Option { return func(r *Reconciler) { r.metrics = m } }

// WithPredictor sets the offline prediction DriftOffline uses.
func WithPredictor(p Predictor) Option { return func(r *Reconciler) { r.predictor = p } }

// WithAdmission sets how the admission configuration is digested (a
// change lifts contests) and replayed (to name the policy or webhook that
// changed a field inside truce's write).
func WithAdmission(a AdmissionView) Option { return func(r *Reconciler) { r.admission = a } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(r *Reconciler) { r.now = now } }

// WithLogger logs passes to l.
func WithLogger(l *slog.Logger) Option { return func(r *Reconciler) { r.log = l } }

// New returns a Reconciler of src into c, remembering state in store.
func New(c cluster.Cluster, src Source, store Store, opts Options, with ...Option) (*Reconciler, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	rules, err := ignore.Compile(opts.Rules, ignore.Options{})
	if err != nil {
		return nil, fmt.Errorf("ignore rules: %w", err)
	}
	r := &Reconciler{cluster: c, source: src, store: store, opts: opts, rules: rules,
		recorder: nopRecorder{}, metrics: nopMetrics{}, now: time.Now,
		log: slog.New(slog.DiscardHandler), history: map[fieldKey]*fieldHistory{}}
	for _, w := range with {
		w(r)
	}
	if opts.Drift == DriftOffline && r.predictor == nil {
		return nil, errors.New("offline drift detection needs a predictor (the admission configuration to predict with)")
	}
	return r, nil
}

// Options returns the options the Reconciler runs with.
func (r *Reconciler) Options() Options { return r.opts }

// desired is one object of the snapshot as truce applies it.
type desired struct {
	ref    cluster.Ref
	source string
	obj    *unstructured.Unstructured
}

// pass is the state of one Reconcile.
type pass struct {
	revision  string
	contested map[cluster.Ref][]Contest
	digest    string
	mu        sync.Mutex
	writes    int
	// created are the namespaces and CRD group/kinds this pass creates.
	createdNamespaces map[string]bool
	createdKinds      map[schema.GroupKind]bool
	// readFailed is set when the cluster could not be read for some
	// object: prune is then skipped.
	readFailed bool
}

func (p *pass) wrote() {
	p.mu.Lock()
	p.writes++
	p.mu.Unlock()
}

// Reconcile runs one pass: fetch the source, apply it in stages, prune,
// save the state. The error is for failures that stopped the pass before
// it could look at objects (source, store); per-object problems are in
// Result.Errors and the objects' results.
func (r *Reconciler) Reconcile(ctx context.Context) (*Result, error) {
	start := r.now()
	res, err := r.reconcile(ctx)
	if res != nil {
		res.Duration = r.now().Sub(start)
	}
	r.metrics.Pass(res, err)
	if err != nil && !r.opts.DryRun {
		r.recorder.Event(r.self(), "Warning", "SyncFailed", err.Error())
	}
	return res, err
}

func (r *Reconciler) self() cluster.Ref {
	return cluster.Ref{GroupVersionKind: GitSyncGVK, Namespace: r.opts.Namespace, Name: r.opts.Name}
}

func (r *Reconciler) reconcile(ctx context.Context) (*Result, error) {
	snap, err := r.source.Fetch(ctx)
	if err != nil {
		return nil, err
	}
	state, err := r.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the state of sync %s/%s: %w", r.opts.Namespace, r.opts.Name, err)
	}
	objs, err := r.prepare(snap.Objects, snap.Namespace)
	if err != nil {
		return nil, err
	}
	res := &Result{Revision: snap.Revision, DryRun: r.opts.DryRun}
	p := &pass{revision: snap.Revision, contested: map[cluster.Ref][]Contest{}}
	r.liftContests(ctx, p, state.Contested, objs)

	deferred, err := r.rememberBeforeWriting(ctx, state.Inventory, objs)
	if err != nil {
		return nil, err
	}

	results := make([]ObjectResult, len(objs))
	index := map[*desired]int{}
	for i, d := range objs {
		index[d] = i
	}
	failedStage := false
	for n, stage := range stages(objs) {
		if len(stage) == 0 {
			continue
		}
		if failedStage {
			for _, d := range stage {
				results[index[d]] = ObjectResult{Ref: d.ref, Source: d.source, Action: Skipped,
					Error: "not applied: namespaces and CRDs failed first", Contested: p.contestsOf(d.ref)}
			}
			continue
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(r.opts.Concurrency)
		for _, d := range stage {
			g.Go(func() error {
				results[index[d]] = r.syncObject(gctx, p, d)
				return nil
			})
		}
		_ = g.Wait()
		if n == 0 {
			p.recordCreated(stage, results, index)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sync interrupted: %w", err)
		}
		var ready []cluster.Ref
		for _, d := range stage {
			o := results[index[d]]
			if o.Action == Failed {
				failedStage = n == 0
			}
			if n == 0 && (o.Action == Created || o.Action == Configured) {
				ready = append(ready, d.ref)
			}
		}
		if n == 0 && !failedStage && !r.opts.DryRun && !servesImmediately(r.cluster) {
			if err := waitReady(ctx, r.cluster, ready, r.opts.WaitTimeout); err != nil {
				res.Errors = append(res.Errors, err.Error())
				failedStage = true
			}
		}
		if n == 0 && deferred != nil {
			// The sync's own namespace exists now.
			if err := r.store.SaveInventory(ctx, deferred); err != nil {
				return nil, fmt.Errorf("recording the inventory before applying: %w", err)
			}
		}
	}
	res.Objects = results
	res.Errors = append(res.Errors, objectErrors(results)...)
	for _, o := range results {
		res.Contested = append(res.Contested, o.Contested...)
		res.Reverted = append(res.Reverted, o.Reverted...)
	}
	// Contests of objects no longer in Git are dropped with them.
	res.Contested = sortedContests(res.Contested)

	inventory := applyOrder(objs)
	leftovers := r.leftGit(state.Inventory, objs)
	switch {
	case len(leftovers) == 0:
	case !r.opts.Prune:
	case len(res.Errors) > 0 || p.readFailed:
		res.Errors = append(res.Errors, fmt.Sprintf("prune skipped: the pass did not read and apply everything (%d object(s) left Git)", len(leftovers)))
	default:
		kept := r.prune(ctx, p, leftovers, res)
		leftovers = kept
	}
	// What was not pruned stays in the inventory, so a later pass prunes
	// it; objects that were never truce's are dropped.
	inventory = append(inventory, leftovers...)
	res.Writes = p.writes

	if r.opts.DryRun {
		return res, nil
	}
	st := &Status{
		Source: r.source.String(), Revision: snap.Revision, LastSync: r.now(),
		Applied: res.Count(Created) + res.Count(Configured), Unchanged: res.Count(Unchanged),
		Pruned: len(res.Pruned), Failed: res.Count(Failed), Contested: res.Contested, Reverted: res.Reverted, Errors: res.Errors,
		State: State{Inventory: inventory, Contested: res.Contested},
	}
	if len(res.Errors) == 0 {
		st.AppliedRevision = snap.Revision
	}
	if err := r.store.Save(ctx, st); err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("saving the status: %v", err))
	}
	return res, nil
}

// applyOrder lists the refs of objs in the order a pass applies them.
func applyOrder(objs []*desired) []cluster.Ref {
	out := make([]cluster.Ref, 0, len(objs))
	for _, st := range stages(objs) {
		for _, d := range st {
			out = append(out, d.ref)
		}
	}
	return out
}

// rememberBeforeWriting saves the inventory extended by the objects this
// pass may create, before it writes anything: a process killed after a
// create would otherwise leave an object no inventory names, never pruned
// when it leaves Git. Objects that end up not created are harmless there
// (prune finds them gone). Nothing is saved when every object is known.
//
// A sync whose state lives in a namespace the revision creates cannot
// save before that namespace exists: the inventory is then returned, to
// be saved once the first stage (Namespaces, CRDs) is applied; only a
// kill during that stage can leave those objects out.
func (r *Reconciler) rememberBeforeWriting(ctx context.Context, inventory []cluster.Ref, objs []*desired) ([]cluster.Ref, error) {
	if r.opts.DryRun {
		return nil, nil
	}
	known := map[cluster.Ref]bool{}
	for _, ref := range inventory {
		known[unversioned(ref)] = true
	}
	if !slices.ContainsFunc(objs, func(d *desired) bool { return !known[unversioned(d.ref)] }) {
		return nil, nil
	}
	next := append(applyOrder(objs), r.leftGit(inventory, objs)...)
	err := r.store.SaveInventory(ctx, next)
	switch {
	case err == nil:
		return nil, nil
	case apierrors.IsNotFound(err) && createsNamespace(objs, r.opts.Namespace):
		return next, nil
	}
	return nil, fmt.Errorf("recording the inventory before applying: %w", err)
}

// createsNamespace reports whether objs hold the Namespace name.
func createsNamespace(objs []*desired, name string) bool {
	for _, d := range objs {
		if d.ref.Group == "" && d.ref.Kind == "Namespace" && d.ref.Name == name {
			return true
		}
	}
	return false
}

// recordCreated notes the namespaces and CRD kinds the first stage
// creates (or, in a rehearsal, would create).
func (p *pass) recordCreated(stage []*desired, results []ObjectResult, index map[*desired]int) {
	p.createdNamespaces, p.createdKinds = map[string]bool{}, map[schema.GroupKind]bool{}
	for _, d := range stage {
		if results[index[d]].Action != Created {
			continue
		}
		if d.ref.Kind == "Namespace" {
			p.createdNamespaces[d.ref.Name] = true
			continue
		}
		gk, _ := definedKind(d.obj)
		p.createdKinds[gk] = true
	}
}

// createdDefinitionFor reports whether err (from predicting a create of d)
// comes from d's namespace or kind not existing yet because this pass
// creates them.
func (p *pass) createsDefinitionFor(d *desired, err error) bool {
	if p.createdKinds[d.ref.GroupKind()] {
		return true
	}
	return apierrors.IsNotFound(err) && p.createdNamespaces[d.ref.Namespace]
}

// servesImmediately reports whether c serves a CRD's kind as soon as it is
// stored (the in-process cluster).
func servesImmediately(c cluster.Cluster) bool {
	s, ok := c.(interface{ ServesImmediately() bool })
	return ok && s.ServesImmediately()
}

// prepare checks the snapshot (one object per name, kinds the cluster
// knows) and stamps each object with its tracking id.
func (r *Reconciler) prepare(objs []manifest.Object, defaultNamespace string) ([]*desired, error) {
	if defaultNamespace == "" {
		defaultNamespace = "default"
	}
	out := make([]*desired, 0, len(objs))
	seen := map[cluster.Ref]string{}
	var errs []error
	namespaced := r.namespacedKinds(objs)
	for _, mo := range objs {
		obj := mo.Object.DeepCopy()
		ref := cluster.RefOf(obj)
		if ref.Namespace == "" && namespaced(ref.GroupVersionKind) {
			// A namespaced object without a namespace goes to "default",
			// as kubectl and Flux (without targetNamespace) do; a chart's
			// to the release's namespace, as Helm does.
			obj.SetNamespace(defaultNamespace)
			ref.Namespace = defaultNamespace
		}
		key := ref
		key.Version = ""
		if prev, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("%s: %s is also at %s; a sync applies each object once", mo.Source, ref, prev))
			continue
		}
		seen[key] = mo.Source.String()
		obj.SetResourceVersion("")
		setTracking(obj, TrackingID(r.opts.Namespace, r.opts.Name, ref))
		out = append(out, &desired{ref: ref, source: mo.Source.String(), obj: obj})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// namespacedKinds tells namespaced kinds: those the cluster serves as
// namespaced, and, for kinds it does not serve yet, those a CRD of the
// snapshot defines as namespaced (applied in the first stage, before the
// objects that need the kind).
func (r *Reconciler) namespacedKinds(objs []manifest.Object) func(schema.GroupVersionKind) bool {
	defined := map[schema.GroupKind]bool{}
	for _, mo := range objs {
		if gvk := mo.Object.GroupVersionKind(); gvk.Group != apiextensionsv1.GroupName || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		gk, namespaced := definedKind(mo.Object)
		defined[gk] = namespaced
	}
	mapper := r.cluster.RESTMapper()
	// Once per kind: a kind the cluster does not serve makes the mapper
	// refresh discovery.
	known := map[schema.GroupVersionKind]bool{}
	return func(gvk schema.GroupVersionKind) bool {
		namespaced, ok := known[gvk]
		if !ok {
			if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
			} else {
				namespaced = defined[gvk.GroupKind()]
			}
			known[gvk] = namespaced
		}
		return namespaced
	}
}

// leftGit returns the inventory entries that are no longer desired, in
// the inventory's order.
func (r *Reconciler) leftGit(inventory []cluster.Ref, objs []*desired) []cluster.Ref {
	want := map[cluster.Ref]bool{}
	for _, d := range objs {
		k := d.ref
		k.Version = ""
		want[k] = true
	}
	var out []cluster.Ref
	for _, ref := range inventory {
		k := ref
		k.Version = ""
		if !want[k] {
			out = append(out, ref)
		}
	}
	return out
}

// digestObjects is a content digest of a snapshot, its revision when it
// has no commit.
func digestObjects(objs []manifest.Object) string {
	h := sha256.New()
	keys := make([]string, 0, len(objs))
	raw := map[string][]byte{}
	for _, o := range objs {
		b, _ := json.Marshal(o.Object.Object)
		k := cluster.RefOf(o.Object).String()
		keys = append(keys, k)
		raw[k] = b
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write(raw[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// describeErr shortens API errors for results.
func describeErr(what string, err error) string {
	return strings.TrimSpace(what + ": " + err.Error())
}

// objectErrors states the objects' errors once per cause: "REF: ERROR"
// for an error one object has, "ERROR (N objects, first REF)" for one many
// share — with the API server down every object fails alike, and the
// GitSync status, its Event and the log should say so once.
func objectErrors(results []ObjectResult) []string {
	type group struct {
		first cluster.Ref
		n     int
	}
	groups := map[string]*group{}
	var order []string
	for _, o := range results {
		if o.Error == "" {
			continue
		}
		g := groups[o.Error]
		if g == nil {
			g = &group{first: o.Ref}
			groups[o.Error] = g
			order = append(order, o.Error)
		}
		g.n++
	}
	out := make([]string, 0, len(order))
	for _, e := range order {
		if g := groups[e]; g.n > 1 {
			out = append(out, fmt.Sprintf("%s (%d objects, first %s)", e, g.n, g.first))
		} else {
			out = append(out, fmt.Sprintf("%s: %s", g.first, e))
		}
	}
	return out
}
