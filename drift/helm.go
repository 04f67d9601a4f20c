package drift

import (
	"context"
	"errors"
	"fmt"

	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/fluxcd/pkg/ssa/normalize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/truce-dev/truce/cluster"
)

// HelmFieldManager is helm-controller's field manager: it sets Helm's
// kube.ManagedFieldsManager to its own name, so installs, upgrades and
// drift corrections all write as it.
const HelmFieldManager = "helm-controller"

// An object labelled or annotated HelmDriftDetectionKey:
// HelmDriftDetectionDisabled is left out of helm-controller's drift
// detection (api/v2 DriftDetectionMetadataKey).
const (
	HelmDriftDetectionKey      = "helm.toolkit.fluxcd.io/driftDetection"
	HelmDriftDetectionDisabled = "disabled"
)

// Helm decides drift as helm-controller does when a HelmRelease's
// spec.driftDetection.mode is warn or enabled (its internal/action.Diff):
// the release's objects, normalised, are server-side applied as a forced
// dry run by helm-controller's field manager, and
// github.com/fluxcd/pkg/ssa/jsondiff compares the answers with the live
// objects: labels and annotations only for what they add or change,
// everything else outside metadata and status, the ignore rules' paths
// removed from both sides, the patch rationalised.
type Helm struct {
	Cluster cluster.Cluster
	// Rules are spec.driftDetection.ignore.
	Rules []FluxRule
}

// HelmDiff is helm-controller's comparison of one object: the drift as
// truce reports it, and jsondiff's Diff, from which helm-controller
// corrects it (nil when the server refused the dry run).
type HelmDiff struct {
	Object *Object
	Diff   *jsondiff.Diff
}

// Name implements Strategy.
func (h *Helm) Name() string { return "helm-controller" }

// Diff implements Strategy.
func (h *Helm) Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error) {
	ds, err := h.DiffRelease(ctx, []*unstructured.Unstructured{desired})
	if err != nil {
		return nil, err
	}
	return ds[0].Object, nil
}

func (h *Helm) options(rules bool) []jsondiff.ListOption {
	opts := []jsondiff.ListOption{
		jsondiff.FieldOwner(HelmFieldManager),
		jsondiff.ExclusionSelector{HelmDriftDetectionKey: HelmDriftDetectionDisabled},
		jsondiff.Rationalize(true),
		jsondiff.Graceful(true),
	}
	if rules && len(h.Rules) > 0 {
		set := make(jsondiff.IgnoreRules, len(h.Rules))
		for i, r := range h.Rules {
			set[i] = r.IgnoreRule
		}
		opts = append(opts, set)
	}
	return opts
}

// DiffRelease compares the objects of one release in one
// jsondiff.UnstructuredList call, as helm-controller does: gracefully, so
// a dry run the server refuses marks its object Rejected and the others
// are still compared. The answers are in the order of objs.
func (h *Helm) DiffRelease(ctx context.Context, objs []*unstructured.Unstructured) ([]HelmDiff, error) {
	c := cluster.ControllerClient(h.Cluster)
	objects := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		objects[i] = o.DeepCopy()
	}
	if err := normalize.UnstructuredListWithScheme(objects, c.Scheme()); err != nil {
		return nil, fmt.Errorf("normalising the release's objects as helm-controller does: %w", err)
	}
	set, err := jsondiff.UnstructuredList(ctx, c, objects, h.options(true)...)
	refused, err := refusals(err)
	if err != nil {
		return nil, fmt.Errorf("helm-controller's drift detection: %w", err)
	}
	byRef := make(map[cluster.Ref]*jsondiff.Diff, len(set))
	for _, d := range set {
		if u, ok := d.DesiredObject.(*unstructured.Unstructured); ok {
			byRef[cluster.RefOf(u)] = d
		}
	}
	matcher := &Flux{Rules: h.Rules}
	out := make([]HelmDiff, len(objects))
	for i, obj := range objects {
		ref := cluster.RefOf(obj)
		o := newObject(h.Name(), objs[i])
		out[i].Object = o
		if msg, ok := refused[ref]; ok {
			o.Status = Rejected
			o.Notes = append(o.Notes, msg)
			continue
		}
		d := byRef[ref]
		if d == nil {
			return nil, fmt.Errorf("helm-controller's drift detection left out %s", ref)
		}
		out[i].Diff = d
		switch d.Type {
		case jsondiff.DiffTypeCreate:
			o.Status = Missing
			o.Notes = append(o.Notes, "not in the cluster")
			continue
		case jsondiff.DiffTypeExclude:
			o.Status = Excluded
			o.Notes = append(o.Notes, "left out of drift detection ("+HelmDriftDetectionKey+": "+HelmDriftDetectionDisabled+", or an ignore rule for the whole object)")
			continue
		}
		live, _ := d.ClusterObject.(*unstructured.Unstructured)
		if live == nil {
			return nil, fmt.Errorf("helm-controller's drift detection of %s: no live object", ref)
		}
		if d.Type == jsondiff.DiffTypeUpdate {
			o.Desired, o.Live, o.Fields = patchedFields(live, d)
		}
		if matching := matcher.matchingRules(obj); len(matching) > 0 {
			if err := h.ignored(ctx, c, obj, live, matching, o); err != nil {
				return nil, err
			}
		}
		// helm-controller's own verdict stands where the field listing
		// places nothing.
		o.finish(live, d.Type == jsondiff.DiffTypeUpdate)
	}
	return out, nil
}

// ignored adds the fields the matching rules hide, found by comparing again
// without them.
func (h *Helm) ignored(ctx context.Context, c client.Client, obj, live *unstructured.Unstructured, matching []FluxRule, o *Object) error {
	var resOpts []jsondiff.ResourceOption
	for _, opt := range h.options(false) {
		if r, ok := opt.(jsondiff.ResourceOption); ok {
			resOpts = append(resOpts, r)
		}
	}
	d, err := jsondiff.Unstructured(ctx, c, obj.DeepCopy(), resOpts...)
	if err != nil {
		return fmt.Errorf("helm-controller's drift detection of %s without ignore rules: %w", cluster.RefOf(obj), err)
	}
	if d.Type != jsondiff.DiffTypeUpdate {
		return nil
	}
	shown := map[string]bool{}
	for _, f := range o.Fields {
		shown[f.Pointer] = true
	}
	_, _, all := patchedFields(live, d)
	for _, f := range all {
		if shown[f.Pointer] {
			continue
		}
		f.IgnoredBy = ruleFor(matching, f.Pointer)
		o.Fields = append(o.Fields, f)
	}
	return nil
}

// patchedFields returns what helm-controller compares of live and of live
// with the correction d applied, and the fields between them. A patch that
// does not apply to the whole live object (it was computed with ignored
// paths removed) is listed operation by operation instead.
func patchedFields(live *unstructured.Unstructured, d *jsondiff.Diff) (desired, current map[string]any, fields []Field) {
	corrected := live.DeepCopy()
	if err := jsondiff.ApplyPatchToUnstructured(corrected, d.Patch); err == nil {
		desired, current = helmView(corrected), helmView(live)
		return desired, current, FieldsBetween(desired, current)
	}
	for _, op := range d.Patch {
		f := Field{Pointer: op.Path, Desired: op.Value}
		switch op.Type {
		case "add":
			f.LiveAbsent = true
		case "remove":
			f.DesiredAbsent = true
			f.Live, _ = lookup(live.Object, op.Path)
		default:
			f.Live, f.LiveAbsent = lookup(live.Object, op.Path)
		}
		fields = append(fields, f)
	}
	return nil, nil, fields
}

// helmView is what jsondiff compares: labels, annotations and everything
// outside metadata and status.
func helmView(u *unstructured.Unstructured) map[string]any {
	return comparedPart(u.DeepCopy())
}

// refusals sorts the errors of a graceful jsondiff.UnstructuredList: dry
// runs the server refused, by object, and any other error.
func refusals(err error) (map[cluster.Ref]string, error) {
	if err == nil {
		return nil, nil
	}
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = agg.Errors()
	}
	out := map[cluster.Ref]string{}
	var other []error
	for _, e := range errs {
		var dr *ssaerrors.DryRunErr
		if errors.As(e, &dr) && dr.InvolvedObject() != nil {
			out[cluster.RefOf(dr.InvolvedObject())] = dr.Error()
			continue
		}
		other = append(other, e)
	}
	return out, errors.Join(other...)
}
