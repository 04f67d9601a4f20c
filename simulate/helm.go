package simulate

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/gitops"
)

// The metadata Helm sets on every object of a release.
const (
	helmManagedByLabel         = "app.kubernetes.io/managed-by"
	helmManagedByValue         = "Helm"
	helmReleaseNameAnnotation  = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnote = "meta.helm.sh/release-namespace"
)

// Notes of the objects helm-controller does not compare.
const (
	helmNotComparedNote   = "spec.driftDetection.mode is disabled: helm-controller does not compare the cluster with the release, so changes by others stand"
	helmInstallFailedNote = "the install failed, and helm-controller does not retry it (install remediation retries default to 0)"
)

// HelmRelease is a Flux HelmRelease reconciled by helm-controller (Flux
// 2.8, helm-controller v1.5 with the Helm 4 SDK). Its first
// reconciliation installs the release: Helm 4 server-side applies every
// object as helm-controller (forcing conflicts only on objects it adopts).
// Later ones, every interval, find chart and values unchanged, so no
// upgrade; what happens to drift is spec.driftDetection.mode's:
//   - disabled (default): the cluster is not compared; others' changes
//     stand.
//   - warn: helm-controller's jsondiff comparison (drift.Helm: a forced
//     server-side apply dry run, so admission's mutations are included)
//     reports drift and nothing is written.
//   - enabled: the same comparison, then action.ApplyDiff corrects it:
//     missing objects are created (POST) and drifted ones get jsondiff's
//     JSON patch, as helm-controller, without force.
type HelmRelease struct {
	// HelmRelease and Namespace name the HelmRelease; ReleaseName and
	// ReleaseNamespace the Helm release, whose metadata Helm puts on every
	// object.
	HelmRelease, Namespace        string
	ReleaseName, ReleaseNamespace string
	Interval                      time.Duration
	// Mode is spec.driftDetection.mode; "" is disabled.
	Mode gitops.HelmDriftMode
	// Rules are spec.driftDetection.ignore.
	Rules []drift.FluxRule
	// ClientSideInstall is spec.install.serverSideApply false: the
	// release's objects are created with POST instead.
	ClientSideInstall bool
	Desired           []Desired

	installed bool
	// failed is set when the install failed: helm-controller stalls.
	failed bool
}

// Name implements Tool.
func (h *HelmRelease) Name() string { return "flux" }

// Manager implements Tool.
func (h *HelmRelease) Manager() string { return drift.HelmFieldManager }

func (h *HelmRelease) mode() gitops.HelmDriftMode {
	if h.Mode == "" {
		return gitops.HelmDriftDisabled
	}
	return h.Mode
}

func (h *HelmRelease) interval() time.Duration {
	if h.Interval > 0 {
		return h.Interval
	}
	return DefaultFluxInterval
}

// Settings implements Tool.
func (h *HelmRelease) Settings() string {
	s := fmt.Sprintf("helm-controller, drift detection %s, every %s", h.mode(), h.interval())
	if h.ClientSideInstall {
		s += ", client-side install"
	}
	if n := len(h.Rules); n > 0 && h.mode() != gitops.HelmDriftDisabled {
		s += fmt.Sprintf(", %d ignore rule(s)", n)
	}
	return s
}

// objects are the release's objects as Helm writes them: with the
// release's metadata (render/flux already added helm-controller's origin
// labels).
func (h *HelmRelease) objects() []*unstructured.Unstructured {
	name, ns := h.ReleaseName, h.ReleaseNamespace
	if name == "" {
		name = h.HelmRelease
	}
	if ns == "" {
		ns = h.Namespace
	}
	out := make([]*unstructured.Unstructured, len(h.Desired))
	for i, d := range h.Desired {
		o := d.Object.DeepCopy()
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[helmManagedByLabel] = helmManagedByValue
		o.SetLabels(labels)
		annotations := o.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[helmReleaseNameAnnotation] = name
		annotations[helmReleaseNamespaceAnnote] = ns
		o.SetAnnotations(annotations)
		out[i] = o
	}
	return out
}

// Reconcile implements Tool.
func (h *HelmRelease) Reconcile(ctx context.Context, c cluster.Cluster, trigger string) (*Round, error) {
	round := &Round{Trigger: trigger}
	switch {
	case !h.installed:
		h.installed = true
		return round, h.install(ctx, c, round)
	case h.failed, h.mode() == gitops.HelmDriftDisabled:
		return round, nil
	}
	objs := h.objects()
	diffs, err := (&drift.Helm{Cluster: c, Rules: h.Rules}).DiffRelease(ctx, objs)
	if err != nil {
		return nil, err
	}
	var set jsondiff.DiffSet
	for i, d := range diffs {
		switch d.Object.Status {
		case drift.Rejected:
			round.Failed = append(round.Failed, d.Object.Notes...)
		case drift.Drifted, drift.Missing:
			round.OutOfSync = append(round.OutOfSync, cluster.RefOf(objs[i]))
			set = append(set, d.Diff)
		}
	}
	if h.mode() != gitops.HelmDriftEnabled {
		return round, nil
	}
	return round, h.correct(ctx, c, set, round)
}

// install writes every object as Helm 4's install does: a server-side
// apply as helm-controller, forced where it adopts an object that exists
// (helm-controller sets ForceConflicts with server-side apply, and takes
// ownership by default); with client-side install, a create (an object
// that exists is adopted by the forced apply either way: Helm's three-way
// merge for it is not modelled). Helm tries
// every object and the install fails if one fails; with no remediation
// retries helm-controller leaves it so.
func (h *HelmRelease) install(ctx context.Context, c cluster.Cluster, round *Round) error {
	for _, o := range h.objects() {
		ref := cluster.RefOf(o)
		_, err := c.Get(ctx, ref)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading %s before installing it: %w", ref, err)
		}
		if h.ClientSideInstall && !exists {
			_, err = c.Create(ctx, o, cluster.WriteOptions{FieldManager: drift.HelmFieldManager})
		} else {
			_, err = c.Apply(ctx, o, cluster.ApplyOptions{FieldManager: drift.HelmFieldManager, Force: exists})
		}
		if err != nil {
			if !isAPIError(err) {
				return fmt.Errorf("installing %s: %w", ref, err)
			}
			h.failed = true
			round.Failed = append(round.Failed, fmt.Sprintf("%s: %v", ref, err))
			continue
		}
		round.OutOfSync = append(round.OutOfSync, ref)
		round.Applied = append(round.Applied, ref)
	}
	return nil
}

// correct is helm-controller's action.ApplyDiff: creates first, then
// patches, each in ssa's kind order, as helm-controller without force; a
// failure is reported and the others still corrected. The JSON patch is
// what the API server does with one: applied to the stored object, which
// is then updated through admission.
func (h *HelmRelease) correct(ctx context.Context, c cluster.Cluster, set jsondiff.DiffSet, round *Round) error {
	sort.SliceStable(set, func(i, j int) bool { return lessDiff(set[i], set[j]) })
	var creates, patches jsondiff.DiffSet
	for _, d := range set {
		switch d.Type {
		case jsondiff.DiffTypeCreate:
			creates = append(creates, d)
		case jsondiff.DiffTypeUpdate:
			patches = append(patches, d)
		}
	}
	fail := func(ref cluster.Ref, what string, err error) error {
		if !isAPIError(err) {
			return fmt.Errorf("correcting the drift of %s: %w", ref, err)
		}
		round.Failed = append(round.Failed, fmt.Sprintf("%s %s failure: %v", ref, what, err))
		return nil
	}
	for _, d := range creates {
		obj, ok := d.DesiredObject.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		ref := cluster.RefOf(obj)
		if _, err := c.Create(ctx, obj.DeepCopy(), cluster.WriteOptions{FieldManager: drift.HelmFieldManager}); err != nil {
			if err := fail(ref, "creation", err); err != nil {
				return err
			}
			continue
		}
		round.Applied = append(round.Applied, ref)
	}
	for _, d := range patches {
		obj, ok := d.DesiredObject.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		ref := cluster.RefOf(obj)
		live, err := c.Get(ctx, ref)
		if err == nil {
			err = jsondiff.ApplyPatchToUnstructured(live, d.Patch)
		}
		if err == nil {
			_, err = c.Update(ctx, live, cluster.WriteOptions{FieldManager: drift.HelmFieldManager})
		}
		if err != nil {
			if err := fail(ref, "patch", err); err != nil {
				return err
			}
			continue
		}
		round.Applied = append(round.Applied, ref)
	}
	return nil
}

// lessDiff is helm-controller's sortableDiffs order: kind (ssa's apply
// order), namespace, name.
func lessDiff(a, b *jsondiff.Diff) bool {
	ga, gb := a.GroupVersionKind().GroupKind(), b.GroupVersionKind().GroupKind()
	if !ssa.Equals(ga, gb) {
		return ssa.IsLessThan(ga, gb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

// Next implements Tool: helm-controller does not watch the release's
// objects; it comes back every interval, unless the install failed.
func (h *HelmRelease) Next(_ context.Context, _ cluster.Cluster, now time.Duration, own bool) (time.Duration, string, bool, error) {
	if !own || h.failed {
		return 0, "", false, nil
	}
	return now + h.interval(), triggerInterval, true, nil
}

// Compare implements Tool: helm-controller's own comparison, or, with
// drift detection disabled, none (every object Excluded, with a note
// saying why).
func (h *HelmRelease) Compare(ctx context.Context, c cluster.Cluster) (map[cluster.Ref]*drift.Object, error) {
	objs := h.objects()
	out := make(map[cluster.Ref]*drift.Object, len(objs))
	if h.mode() == gitops.HelmDriftDisabled || h.failed {
		note := helmNotComparedNote
		if h.failed {
			note = helmInstallFailedNote
		}
		for i, o := range objs {
			out[cluster.RefOf(o)] = &drift.Object{Source: h.Desired[i].Source.String(), APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
				Namespace: o.GetNamespace(), Name: o.GetName(), Strategy: (&drift.Helm{}).Name(), Status: drift.Excluded,
				Fields: []drift.Field{}, Notes: []string{note}}
		}
		return out, nil
	}
	diffs, err := (&drift.Helm{Cluster: c, Rules: h.Rules}).DiffRelease(ctx, objs)
	if err != nil {
		return nil, err
	}
	for i, d := range diffs {
		d.Object.Source = h.Desired[i].Source.String()
		out[cluster.RefOf(objs[i])] = d.Object
	}
	return out, nil
}

// Owned implements Tool: helm-controller deletes what a new release
// revision drops; there is none during a run.
func (h *HelmRelease) Owned(context.Context, cluster.Cluster) ([]cluster.Ref, error) {
	return nil, nil
}
