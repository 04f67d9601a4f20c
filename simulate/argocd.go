package simulate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission/kubectl"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/argocd"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/internal/parallel"
)

// ArgoManager is the field manager Argo CD's application controller writes
// as.
const ArgoManager = argocd.ServerSideDiffManager

// Backoff is Argo CD's self-heal backoff: the first self-heal runs at once,
// the n-th waits Initial·Factor^(n-2), at most Cap (the application
// controller's --self-heal-backoff-timeout-seconds, -factor and -cap-seconds;
// 2s, 3 and 300s in current releases). The count restarts when the
// application is seen Synced.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Cap     time.Duration
}

// DefaultBackoff is Argo CD 3.x's self-heal backoff.
func DefaultBackoff() Backoff {
	return Backoff{Initial: 2 * time.Second, Factor: 3, Cap: 300 * time.Second}
}

// delay is the wait before a self-heal after attempts earlier ones.
func (b Backoff) delay(attempts int) time.Duration {
	if attempts <= 0 {
		return 0
	}
	d := float64(b.Initial)
	for i := 1; i < attempts && d < float64(b.Cap); i++ {
		d *= b.Factor
	}
	if d > float64(b.Cap) {
		return b.Cap
	}
	return time.Duration(d)
}

// ArgoCD is an Application managed by Argo CD's application controller.
type ArgoCD struct {
	// App names the Application (its tracking mark).
	App string
	// Automated, SelfHeal and Prune are spec.syncPolicy.automated. Without
	// Automated only the initial sync runs (a person pressing Sync).
	Automated, SelfHeal, Prune bool
	// ServerSideApply and RespectIgnoreDifferences are sync options.
	ServerSideApply, RespectIgnoreDifferences bool
	// ServerSideDiff and IncludeMutationWebhook are the compare options.
	ServerSideDiff, IncludeMutationWebhook bool
	// TrackingMethod is "annotation" (default), "label" or
	// "annotation+label"; InstanceLabelKey defaults to
	// app.kubernetes.io/instance.
	TrackingMethod   string
	InstanceLabelKey string
	// Rules are the ignoreDifferences that apply (Application, resource
	// annotations, argocd-cm).
	Rules                 *ignore.Set
	IgnoreAggregatedRoles bool
	Backoff               Backoff
	Desired               []Desired
	// Kinds are the kinds to look for prune candidates in, besides Git's.
	Kinds []schema.GroupVersionKind

	attempts int
	// pending is set while a self-heal is scheduled.
	pending bool
	// failed is set when the last sync failed: Argo CD does not auto-sync
	// a revision again after a failed attempt ("Skipping auto-sync: failed
	// previous sync attempt"), self-heal or not.
	failed bool
	// cache holds the last comparison per object with the live
	// resourceVersion it was made against.
	cache map[cluster.Ref]cached
	// compareWorkers is how many legacy diffs run at a time (GOMAXPROCS
	// when 0); tests set it to compare with one at a time.
	compareWorkers int
}

type cached struct {
	rv  string
	obj *drift.Object
}

// lookupCache returns the live resourceVersion of ref ("" when it does not
// exist) and the comparison cached for it, if it was made against that
// version.
func lookupCache(ctx context.Context, c cluster.Cluster, cache map[cluster.Ref]cached, ref cluster.Ref) (string, *drift.Object, error) {
	rv, err := cluster.ResourceVersion(ctx, c, ref)
	if apierrors.IsNotFound(err) {
		rv = ""
	} else if err != nil {
		return "", nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	if hit, ok := cache[ref]; ok && hit.rv == rv && rv != "" {
		return rv, hit.obj, nil
	}
	return rv, nil, nil
}

// Name implements Tool.
func (a *ArgoCD) Name() string { return "argocd" }

// Manager implements Tool.
func (a *ArgoCD) Manager() string { return ArgoManager }

// Settings implements Tool.
func (a *ArgoCD) Settings() string {
	var parts []string
	switch {
	case a.ServerSideDiff && a.IncludeMutationWebhook:
		parts = append(parts, "server-side diff with IncludeMutationWebhook")
	case a.ServerSideDiff:
		parts = append(parts, "server-side diff")
	default:
		parts = append(parts, "legacy three-way diff")
	}
	if a.ServerSideApply {
		parts = append(parts, "server-side apply")
	} else {
		parts = append(parts, "client-side apply")
	}
	switch {
	case !a.Automated:
		parts = append(parts, "manual sync")
	case a.SelfHeal:
		b := a.Backoff
		if b.Initial <= 0 {
			b = DefaultBackoff()
		}
		parts = append(parts, fmt.Sprintf("automated, self-heal (backoff %s ×%g, cap %s)", b.Initial, b.Factor, b.Cap))
	default:
		parts = append(parts, "automated, no self-heal")
	}
	if a.Automated && a.Prune {
		parts = append(parts, "prune")
	}
	if a.RespectIgnoreDifferences {
		parts = append(parts, "RespectIgnoreDifferences")
	}
	parts = append(parts, a.tracking().Method+" tracking")
	return strings.Join(parts, ", ")
}

func (a *ArgoCD) tracking() drift.Tracking {
	m := a.TrackingMethod
	if m == "" {
		m = "annotation"
	}
	return drift.Tracking{App: a.App, Method: m}
}

func (a *ArgoCD) strategy(ctx context.Context, c cluster.Cluster) drift.Strategy {
	tcs := drift.TypeConvertersFor(ctx, c)
	if a.ServerSideDiff {
		return drift.NewArgoServerSide(c, a.IncludeMutationWebhook, a.Rules, tcs, a.tracking(), a.IgnoreAggregatedRoles)
	}
	return drift.NewArgoLegacy(c, a.Rules, tcs, a.tracking(), a.IgnoreAggregatedRoles)
}

// Compare implements Tool: the strategy's diff of every object of Git,
// reusing the last one while the live object has not changed. Legacy
// diffs only read the cluster, so the objects that need one are diffed
// GOMAXPROCS at a time (the first round diffs every object); server-side
// diffs write dry runs and go one at a time.
func (a *ArgoCD) Compare(ctx context.Context, c cluster.Cluster) (map[cluster.Ref]*drift.Object, error) {
	if a.cache == nil {
		a.cache = map[cluster.Ref]cached{}
	}
	s := a.strategy(ctx, c)
	out := make(map[cluster.Ref]*drift.Object, len(a.Desired))
	type miss struct {
		d   Desired
		ref cluster.Ref
		rv  string
	}
	var misses []miss
	for _, d := range a.Desired {
		ref := cluster.RefOf(d.Object)
		rv, hit, err := lookupCache(ctx, c, a.cache, ref)
		if err != nil {
			return nil, err
		}
		if hit != nil {
			out[ref] = hit
			continue
		}
		misses = append(misses, miss{d, ref, rv})
	}
	workers := a.compareWorkers
	if a.ServerSideDiff {
		workers = 1
	}
	diffs := make([]*drift.Object, len(misses))
	errs := make([]error, len(misses))
	parallel.Each(len(misses), workers, func(i int) {
		diffs[i], errs[i] = s.Diff(ctx, misses[i].d.Object)
	})
	for i, m := range misses {
		if errs[i] != nil {
			return nil, errs[i]
		}
		o := diffs[i]
		o.Source = m.d.Source.String()
		a.cache[m.ref] = cached{rv: m.rv, obj: o}
		out[m.ref] = o
	}
	return out, nil
}

// Owned implements Tool: live objects carrying the Application's tracking
// mark for themselves that Git does not have.
func (a *ArgoCD) Owned(ctx context.Context, c cluster.Cluster) ([]cluster.Ref, error) {
	inGit := map[cluster.Ref]bool{}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, d := range a.Desired {
		inGit[cluster.RefOf(d.Object)] = true
		kinds[d.Object.GroupVersionKind()] = true
	}
	for _, k := range a.Kinds {
		kinds[k] = true
	}
	var out []cluster.Ref
	for gvk := range kinds {
		// Walked, not listed: the marks are in every version's metadata,
		// and copying every object of Git's kinds every round was a
		// large part of a round.
		err := cluster.Walk(ctx, c, gvk, "", func(o *unstructured.Unstructured) {
			ref := cluster.Ref{GroupVersionKind: gvk, Namespace: o.GetNamespace(), Name: o.GetName()}
			if !inGit[ref] && a.tracks(o) {
				out = append(out, ref)
			}
		})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
	}
	sortRefs(out)
	return out, nil
}

// tracks reports whether Argo CD counts a live object as the
// Application's: by the instance label with label tracking, by a
// tracking-id naming the object itself otherwise (a copy carries the id of
// its original and is ignored).
func (a *ArgoCD) tracks(o *unstructured.Unstructured) bool {
	t := a.tracking()
	if t.Method == "label" {
		key := a.InstanceLabelKey
		if key == "" {
			key = drift.TrackingLabel
		}
		return o.GetLabels()[key] == a.App
	}
	id, ok := o.GetAnnotations()[drift.TrackingIDAnnotation]
	if !ok {
		return false
	}
	gvk := o.GroupVersionKind()
	return id == fmt.Sprintf("%s:%s/%s:%s/%s", a.App, gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName())
}

// outOfSync reports whether the comparison asks for a sync.
func outOfSync(o *drift.Object) bool {
	return o.Status == drift.Drifted || o.Status == drift.Missing || o.Status == drift.Rejected
}

// Reconcile implements Tool: a sync operation. Out-of-sync objects are
// applied in Argo CD's sync order (argocd.SyncOrder: waves, then kinds,
// namespaces and CRDs first), then, with
// automated prune, owned objects missing from Git are deleted.
func (a *ArgoCD) Reconcile(ctx context.Context, c cluster.Cluster, trigger string) (*Round, error) {
	a.pending = false
	a.failed = false
	round := &Round{Trigger: trigger}
	status, err := a.Compare(ctx, c)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, len(a.Desired))
	for i, d := range a.Desired {
		objs[i] = d.Object
	}
	for _, at := range argocd.SyncOrder(objs) {
		d := a.Desired[at]
		ref := cluster.RefOf(d.Object)
		if !outOfSync(status[ref]) {
			continue
		}
		round.OutOfSync = append(round.OutOfSync, ref)
		round.Applied = append(round.Applied, ref)
		if err := a.apply(ctx, c, d.Object); err != nil {
			if !isAPIError(err) {
				return nil, err
			}
			a.failed = true
			round.Failed = append(round.Failed, ref.String()+": "+err.Error())
		}
	}
	owned, err := a.Owned(ctx, c)
	if err != nil {
		return nil, err
	}
	round.OutOfSync = append(round.OutOfSync, owned...)
	if a.Automated && a.Prune {
		for _, ref := range owned {
			if err := c.Delete(ctx, ref, cluster.DeleteOptions{}); err != nil {
				if !isAPIError(err) {
					return nil, err
				}
				a.failed = true
				round.Failed = append(round.Failed, "pruning "+ref.String()+": "+err.Error())
			}
			round.Pruned = append(round.Pruned, ref)
		}
	}
	return round, nil
}

// apply writes one object as Argo CD's sync does.
func (a *ArgoCD) apply(ctx context.Context, c cluster.Cluster, desired *unstructured.Unstructured) error {
	config := desired.DeepCopy()
	a.tracking().Mark(config)
	ref := cluster.RefOf(config)
	live, err := c.Get(ctx, ref)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s: %w", ref, err)
	}
	if err != nil {
		live = nil
	}
	if live != nil && a.RespectIgnoreDifferences {
		if config, err = a.respectIgnore(ctx, c, config, live); err != nil {
			return err
		}
	}
	if a.ServerSideApply {
		_, err := c.Apply(ctx, config, cluster.ApplyOptions{FieldManager: ArgoManager, Force: true})
		return err
	}
	if live == nil {
		withLast, err := argocd.WithLastApplied(config)
		if err != nil {
			return err
		}
		_, err = c.Create(ctx, withLast, cluster.WriteOptions{FieldManager: ArgoManager})
		return err
	}
	// Argo CD's sync runs kubectl apply: the three-way patch computed on
	// the client is what the server (and its admission) receives.
	req, err := kubectl.ClientSideApply(config, live)
	if err != nil {
		return fmt.Errorf("client-side apply of %s: %w", ref, err)
	}
	if req.Unchanged {
		return nil
	}
	_, err = c.Patch(ctx, ref, req.PatchType, req.Patch, cluster.WriteOptions{FieldManager: ArgoManager})
	return err
}

// respectIgnore gives the fields the ignore rules hide their live value in
// the object to apply (RespectIgnoreDifferences=true), as Argo CD does for
// resources that already exist.
func (a *ArgoCD) respectIgnore(ctx context.Context, c cluster.Cluster, config, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if a.Rules == nil {
		return config, nil
	}
	pointers := map[string]bool{}
	for _, u := range []*unstructured.Unstructured{live.DeepCopy(), config.DeepCopy()} {
		ms, err := a.Rules.Normalize(ctx, u)
		if err != nil && !errors.Is(err, ignore.ErrJQTimeout) {
			return nil, err
		}
		for _, m := range ms {
			pointers[m.Pointer] = true
		}
	}
	out := config.DeepCopy()
	keys := make([]string, 0, len(pointers))
	for p := range pointers {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		if v, ok := valueAt(live.Object, p); ok {
			setAt(out.Object, p, v)
		} else {
			removeAt(out.Object, p)
		}
	}
	tc, err := drift.TypeConvertersFor(ctx, c)(out.GroupVersionKind().GroupVersion())
	if err == nil {
		if _, err := a.Rules.NormalizeManaged(out, live, tc); err != nil {
			return nil, fmt.Errorf("managedFieldsManagers of %s: %w", cluster.RefOf(out), err)
		}
	}
	return out, nil
}

// Next implements Tool. After its own sync, and whenever a watched object
// changes, the controller compares; an OutOfSync application with
// self-heal is synced again after the backoff.
func (a *ArgoCD) Next(ctx context.Context, c cluster.Cluster, now time.Duration, own bool) (time.Duration, string, bool, error) {
	status, err := a.Compare(ctx, c)
	if err != nil {
		return 0, "", false, err
	}
	owned, err := a.Owned(ctx, c)
	if err != nil {
		return 0, "", false, err
	}
	needed := len(owned) > 0
	for _, o := range status {
		needed = needed || outOfSync(o)
	}
	if !needed {
		a.attempts = 0
		return 0, "", false, nil
	}
	if !a.Automated || !a.SelfHeal || a.pending || a.failed {
		return 0, "", false, nil
	}
	b := a.Backoff
	if b.Initial <= 0 {
		b = DefaultBackoff()
	}
	delay := b.delay(a.attempts)
	a.attempts++
	a.pending = true
	return now + delay, fmt.Sprintf("self-heal (attempt %d)", a.attempts), true, nil
}

func isAPIError(err error) bool {
	_, ok := err.(apierrors.APIStatus)
	return ok || errors.As(err, new(apierrors.APIStatus))
}
