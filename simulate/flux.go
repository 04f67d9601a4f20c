package simulate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/fluxcd/pkg/ssa/normalize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
)

// DefaultFluxInterval is the interval the simulation uses for a
// Kustomization that does not set spec.interval.
const DefaultFluxInterval = 10 * time.Minute

// fluxOwnerGroup prefixes the labels kustomize-controller puts on every
// object it applies.
const fluxOwnerGroup = "kustomize.toolkit.fluxcd.io"

// Flux is a Kustomization reconciled by kustomize-controller: every
// interval, normalise the manifests, server-side apply them (forced, as
// kustomize-controller's field manager) with Flux's own
// ssa.ResourceManager, which dry-runs each object first and skips those
// that did not drift, and honours spec.ignore by stripping or adopting the
// ignored fields.
type Flux struct {
	// Kustomization and Namespace name the Kustomization (its owner labels).
	Kustomization, Namespace string
	Interval                 time.Duration
	Rules                    []drift.FluxRule
	// Force is spec.force: recreate objects whose immutable fields changed.
	Force   bool
	Desired []Desired

	// rejected is the last dry-run error that stopped a reconciliation.
	rejected map[cluster.Ref]string
	cache    map[cluster.Ref]cached
	// unchanged holds, for objects the last reconciliation's own drift
	// detection found unchanged, their resourceVersion then: while it
	// holds, Flux's diff would find them in sync again.
	unchanged map[cluster.Ref]string
}

// Name implements Tool.
func (f *Flux) Name() string { return "flux" }

// Manager implements Tool.
func (f *Flux) Manager() string { return drift.FluxFieldManager }

func (f *Flux) interval() time.Duration {
	if f.Interval > 0 {
		return f.Interval
	}
	return DefaultFluxInterval
}

// Settings implements Tool.
func (f *Flux) Settings() string {
	s := fmt.Sprintf("server-side apply and dry-run drift detection every %s", f.interval())
	if n := len(f.Rules); n > 0 {
		s += fmt.Sprintf(", %d ignore rule(s)", n)
	}
	return s
}

func (f *Flux) owner() (string, string) {
	name, ns := f.Kustomization, f.Namespace
	if name == "" {
		name = "app"
	}
	if ns == "" {
		ns = "flux-system"
	}
	return name, ns
}

// objects are the manifests as kustomize-controller applies them:
// normalised, with its owner labels.
func (f *Flux) objects() ([]*unstructured.Unstructured, error) {
	name, ns := f.owner()
	out := make([]*unstructured.Unstructured, 0, len(f.Desired))
	for _, d := range f.Desired {
		o := d.Object.DeepCopy()
		if err := normalize.Unstructured(o); err != nil {
			return nil, fmt.Errorf("%s: normalising as Flux does: %w", d.Source, err)
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[fluxOwnerGroup+"/name"] = name
		labels[fluxOwnerGroup+"/namespace"] = ns
		o.SetLabels(labels)
		out = append(out, o)
	}
	return out, nil
}

func (f *Flux) manager(c cluster.Cluster) *ssa.ResourceManager {
	return ssa.NewResourceManager(cluster.ControllerClient(c), nil, ssa.Owner{Field: drift.FluxFieldManager, Group: fluxOwnerGroup})
}

func (f *Flux) ignoreRules() []jsondiff.IgnoreRule {
	out := make([]jsondiff.IgnoreRule, len(f.Rules))
	for i, r := range f.Rules {
		out[i] = r.IgnoreRule
	}
	return out
}

// Reconcile implements Tool. The objects are applied in
// ApplyAllStaged's stages (drift.FluxStages: Namespaces and CRDs first);
// a dry run that fails stops the reconciliation
// before anything of its stage is applied, as in kustomize-controller.
func (f *Flux) Reconcile(ctx context.Context, c cluster.Cluster, trigger string) (*Round, error) {
	round := &Round{Trigger: trigger}
	objs, err := f.objects()
	if err != nil {
		return nil, err
	}
	rm := f.manager(c)
	opts := ssa.DefaultApplyOptions()
	opts.Force = f.Force
	opts.DriftIgnoreRules = f.ignoreRules()
	f.rejected = nil
	f.unchanged = map[cluster.Ref]string{}
	for _, positions := range drift.FluxStages(objs) {
		stage := make([]*unstructured.Unstructured, len(positions))
		for i, at := range positions {
			stage[i] = objs[at]
		}
		cs, err := rm.ApplyAll(ctx, stage, opts)
		if err != nil {
			var dr *ssaerrors.DryRunErr
			if errors.As(err, &dr) || isAPIError(err) {
				f.rejected = map[cluster.Ref]string{}
				ref := cluster.Ref{}
				if dr != nil && dr.InvolvedObject() != nil {
					ref = cluster.RefOf(dr.InvolvedObject())
				}
				f.rejected[ref] = err.Error()
				round.Failed = append(round.Failed, err.Error())
				return round, nil
			}
			return nil, err
		}
		for _, e := range cs.Entries {
			ref := cluster.Ref{Namespace: e.ObjMetadata.Namespace, Name: e.ObjMetadata.Name}
			ref.Group, ref.Kind = e.ObjMetadata.GroupKind.Group, e.ObjMetadata.GroupKind.Kind
			if i := strings.LastIndex(e.GroupVersion, "/"); i >= 0 {
				ref.Version = e.GroupVersion[i+1:]
			} else {
				ref.Version = e.GroupVersion
			}
			if e.Action == ssa.UnchangedAction {
				if live, err := c.Get(ctx, ref); err == nil {
					f.unchanged[ref] = live.GetResourceVersion()
				}
				continue
			}
			if e.Action != ssa.CreatedAction && e.Action != ssa.ConfiguredAction {
				continue
			}
			round.OutOfSync = append(round.OutOfSync, ref)
			round.Applied = append(round.Applied, ref)
		}
	}
	return round, nil
}

// Next implements Tool: Flux does not watch what it applied; it comes
// back every interval.
func (f *Flux) Next(_ context.Context, _ cluster.Cluster, now time.Duration, own bool) (time.Duration, string, bool, error) {
	if !own {
		return 0, "", false, nil
	}
	return now + f.interval(), triggerInterval, true, nil
}

// Compare implements Tool with the flux drift strategy (Flux's own Diff).
func (f *Flux) Compare(ctx context.Context, c cluster.Cluster) (map[cluster.Ref]*drift.Object, error) {
	if f.cache == nil {
		f.cache = map[cluster.Ref]cached{}
	}
	objs, err := f.objects()
	if err != nil {
		return nil, err
	}
	s := &drift.Flux{Cluster: c, Rules: f.Rules}
	out := make(map[cluster.Ref]*drift.Object, len(objs))
	for i, o := range objs {
		ref := cluster.RefOf(o)
		rv, hit, err := lookupCache(ctx, c, f.cache, ref)
		if err != nil {
			return nil, err
		}
		if hit != nil {
			out[ref] = hit
			continue
		}
		if urv, ok := f.unchanged[ref]; ok && urv == rv && rv != "" {
			d := &drift.Object{Source: f.Desired[i].Source.String(), APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(),
				Name: o.GetName(), Strategy: "flux", Status: drift.InSync, Fields: []drift.Field{}}
			f.cache[ref] = cached{rv: rv, obj: d}
			out[ref] = d
			continue
		}
		d, err := s.Diff(ctx, o)
		if err != nil {
			return nil, err
		}
		d.Source = f.Desired[i].Source.String()
		f.cache[ref] = cached{rv: rv, obj: d}
		out[ref] = d
	}
	return out, nil
}

// Owned implements Tool: Flux prunes by its inventory, what it applied
// and Git dropped; Git does not change during a run, so nothing.
func (f *Flux) Owned(context.Context, cluster.Cluster) ([]cluster.Ref, error) { return nil, nil }
