package drift

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/argocd"
	"github.com/truce-dev/truce/drift/ignore"
)

// TypeConverters returns the structured-merge-diff type of a group
// version's kinds, built-in or from a CRD.
type TypeConverters func(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error)

// Tracking is how Argo CD marks the objects of an Application; the mark is
// part of the desired object it compares.
type Tracking struct {
	// App is the Application's name; empty means no mark is added.
	App string
	// Method is "annotation" (Argo CD 3's default), "label" or
	// "annotation+label" (argocd-cm application.resourceTrackingMethod).
	Method string
	// AppNamespace is the Application's namespace when it is not Argo CD's
	// own (apps in any namespace prefix the id with it).
	AppNamespace string
}

// Argo CD's tracking marks.
const (
	TrackingIDAnnotation = "argocd.argoproj.io/tracking-id"
	TrackingLabel        = "app.kubernetes.io/instance"
)

// Mark adds the tracking mark to a desired object, as Argo CD does before
// it compares or applies.
func (t Tracking) Mark(obj *unstructured.Unstructured) {
	if t.App == "" {
		return
	}
	if t.Method == "label" || t.Method == "annotation+label" {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[TrackingLabel] = t.App
		obj.SetLabels(labels)
	}
	if t.Method == "" || strings.HasPrefix(t.Method, "annotation") {
		app := t.App
		if t.AppNamespace != "" {
			app = t.AppNamespace + "_" + t.App
		}
		gvk := obj.GroupVersionKind()
		id := fmt.Sprintf("%s:%s/%s:%s/%s", app, gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[TrackingIDAnnotation] = id
		obj.SetAnnotations(annotations)
	}
}

// argoRules is the part common to both Argo CD strategies: ignoreDifferences
// from the Application, argocd-cm and the resource's annotation.
type argoRules struct {
	Rules          *ignore.Set
	TypeConverters TypeConverters
	Tracking       Tracking
	// IgnoreAggregatedRoles is argocd-cm resource.compareoptions.
	IgnoreAggregatedRoles bool
}

// setNormalizer runs the jsonPointers and jq rules as Argo CD's ignore
// normalizer, recording what each removed.
type setNormalizer struct {
	ctx     context.Context
	set     *ignore.Set
	matches map[string]string
}

func (n *setNormalizer) Normalize(u *unstructured.Unstructured) error {
	ms, err := n.set.Normalize(n.ctx, u)
	if err != nil && !errors.Is(err, ignore.ErrJQTimeout) {
		return err
	}
	for _, m := range ms {
		n.matches[m.Pointer] = m.Rule.String()
	}
	return nil
}

func (a *argoRules) options(ctx context.Context, withRules bool) (argocd.Options, *setNormalizer) {
	opts := argocd.Options{IgnoreAggregatedRoles: a.IgnoreAggregatedRoles}
	if !withRules || a.Rules == nil {
		return opts, nil
	}
	n := &setNormalizer{ctx: ctx, set: a.Rules, matches: map[string]string{}}
	opts.Normalizer = n
	return opts, n
}

// managed hands fields owned by managedFieldsManagers over to their live
// value in config.
func (a *argoRules) managed(config, live *unstructured.Unstructured) (map[string]string, error) {
	out := map[string]string{}
	if a.Rules == nil || a.TypeConverters == nil || live == nil {
		return out, nil
	}
	tc, err := a.TypeConverters(config.GroupVersionKind().GroupVersion())
	if err != nil {
		return nil, err
	}
	ms, err := a.Rules.NormalizeManaged(config, live, tc)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		out[m.Pointer] = m.Rule.String()
	}
	return out, nil
}

// report fills an Object from a diff with rules and one without, so that
// fields the rules hide are listed with the rule.
func report(out *Object, withRules, withoutRules *argocd.Result, ignored map[string]string, live *unstructured.Unstructured) {
	out.Live = objectOrNil(withRules.Live)
	if withRules.Modified || withRules.PredictedLive == nil || withRules.Live == nil {
		out.Desired = objectOrNil(withRules.PredictedLive)
	} else {
		// Argo CD found their encodings equal: one copy serves both (a
		// comparison of every object is kept per round).
		out.Desired = out.Live
	}
	shown := map[string]bool{}
	for _, c := range argocd.Fields(withRules.PredictedLive, withRules.Live) {
		shown[c.Pointer] = true
		out.Fields = append(out.Fields, fieldOf(c))
	}
	if withoutRules != nil {
		for _, c := range argocd.Fields(withoutRules.PredictedLive, withoutRules.Live) {
			if shown[c.Pointer] {
				continue
			}
			f := fieldOf(c)
			f.IgnoredBy = ignoredBy(ignored, c.Pointer)
			if f.IgnoredBy == "" {
				f.IgnoredBy = "ignoreDifferences"
			}
			out.Fields = append(out.Fields, f)
		}
	}
	out.Notes = append(out.Notes, withRules.Notes...)
	// Argo CD compares bytes; a difference the field listing cannot place
	// (ordering, types) is still OutOfSync.
	if out.finish(live, withRules.Modified) {
		out.Notes = append(out.Notes, "Argo CD sees a difference in the encoding of the objects")
	}
}

func ignoredBy(ignored map[string]string, pointer string) string {
	for p, name := range ignored {
		if p == pointer || strings.HasPrefix(pointer, p+"/") || strings.HasPrefix(p, pointer+"/") {
			return name
		}
	}
	return ""
}

func objectOrNil(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	return c.Object
}

func fieldOf(c argocd.FieldChange) Field {
	return Field{Pointer: c.Pointer, Desired: c.Desired, Live: c.Live, DesiredAbsent: !c.DesiredPresent, LiveAbsent: !c.LivePresent}
}

// ArgoLegacy is Argo CD's default diff: a three-way diff of Git, live and
// the last-applied-configuration annotation (two-way without it), with
// ignoreDifferences, computed in Argo CD from the live object alone.
type ArgoLegacy struct {
	Cluster cluster.Cluster
	argoRules
}

// NewArgoLegacy returns the legacy strategy.
func NewArgoLegacy(c cluster.Cluster, rules *ignore.Set, tcs TypeConverters, tracking Tracking, ignoreAggregatedRoles bool) *ArgoLegacy {
	return &ArgoLegacy{Cluster: c, argoRules: argoRules{Rules: rules, TypeConverters: tcs, Tracking: tracking, IgnoreAggregatedRoles: ignoreAggregatedRoles}}
}

// Name implements Strategy.
func (s *ArgoLegacy) Name() string { return "argocd-legacy" }

// Diff implements Strategy.
func (s *ArgoLegacy) Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error) {
	out := newObject(s.Name(), desired)
	live, err := s.Cluster.Get(ctx, cluster.RefOf(desired))
	if apierrors.IsNotFound(err) {
		out.Status = Missing
		out.Notes = append(out.Notes, "OutOfSync: missing from the cluster")
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", cluster.RefOf(desired), err)
	}
	config := desiredMarked(desired, s.Tracking)
	ignored, err := s.managed(config, live)
	if err != nil {
		return nil, fmt.Errorf("managedFieldsManagers of %s: %w", cluster.RefOf(desired), err)
	}
	opts, n := s.options(ctx, true)
	// config is this call's own copy and not read after: no copy of it.
	with, err := argocd.Diff(config, live.DeepCopy(), opts)
	if err != nil {
		return nil, fmt.Errorf("argocd diff of %s: %w", cluster.RefOf(desired), err)
	}
	var without *argocd.Result
	if n != nil || len(ignored) > 0 {
		plain, _ := s.options(ctx, false)
		if without, err = argocd.Diff(desiredMarked(desired, s.Tracking), live.DeepCopy(), plain); err != nil {
			return nil, fmt.Errorf("argocd diff of %s: %w", cluster.RefOf(desired), err)
		}
		if n != nil {
			for p, r := range n.matches {
				ignored[p] = r
			}
		}
	}
	report(out, with, without, ignored, live)
	return out, nil
}

func desiredMarked(desired *unstructured.Unstructured, t Tracking) *unstructured.Unstructured {
	c := desired.DeepCopy()
	t.Mark(c)
	return c
}

// ArgoServerSide is Argo CD's server-side diff: a server-side apply dry run
// per resource as argocd-controller, compared with live. Unless
// IncludeMutationWebhook, fields the dry run changed that argocd-controller
// does not own take their live value. Resources missing from the cluster
// get no dry run.
type ArgoServerSide struct {
	Cluster                cluster.Cluster
	IncludeMutationWebhook bool
	argoRules
}

// NewArgoServerSide returns the server-side diff strategy.
func NewArgoServerSide(c cluster.Cluster, includeMutationWebhook bool, rules *ignore.Set, tcs TypeConverters, tracking Tracking, ignoreAggregatedRoles bool) *ArgoServerSide {
	return &ArgoServerSide{Cluster: c, IncludeMutationWebhook: includeMutationWebhook,
		argoRules: argoRules{Rules: rules, TypeConverters: tcs, Tracking: tracking, IgnoreAggregatedRoles: ignoreAggregatedRoles}}
}

// Name implements Strategy.
func (s *ArgoServerSide) Name() string { return "argocd-ssd" }

// Diff implements Strategy.
func (s *ArgoServerSide) Diff(ctx context.Context, desired *unstructured.Unstructured) (*Object, error) {
	out := newObject(s.Name(), desired)
	live, err := s.Cluster.Get(ctx, cluster.RefOf(desired))
	if apierrors.IsNotFound(err) {
		out.Status = Missing
		out.Notes = append(out.Notes, "OutOfSync: missing from the cluster (no server-side diff until it exists)")
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", cluster.RefOf(desired), err)
	}
	config := desiredMarked(desired, s.Tracking)
	// gitops-engine applies with ForceConflicts for server-side apply, dry
	// runs included.
	predicted, err := s.Cluster.Apply(ctx, config, cluster.ApplyOptions{FieldManager: argocd.ServerSideDiffManager, Force: true, DryRun: true})
	if err != nil {
		if status, ok := err.(apierrors.APIStatus); ok {
			out.Status = Rejected
			out.Notes = append(out.Notes, fmt.Sprintf("server-side dry run refused (%d %s): %s",
				status.Status().Code, status.Status().Reason, status.Status().Message))
			return out, nil
		}
		return nil, fmt.Errorf("server-side dry run of %s: %w", cluster.RefOf(desired), err)
	}
	var tc managedfields.TypeConverter
	if !s.IncludeMutationWebhook {
		if s.TypeConverters == nil {
			return nil, fmt.Errorf("server-side diff of %s without IncludeMutationWebhook needs type information", cluster.RefOf(desired))
		}
		if tc, err = s.TypeConverters(desired.GroupVersionKind().GroupVersion()); err != nil {
			return nil, err
		}
	}
	plain := predicted.DeepCopy()
	ignored, err := s.managed(predicted, live)
	if err != nil {
		return nil, fmt.Errorf("managedFieldsManagers of %s: %w", cluster.RefOf(desired), err)
	}
	ssd := func(predicted *unstructured.Unstructured, opts argocd.Options) (*argocd.Result, error) {
		return argocd.ServerSideDiff(predicted.DeepCopy(), live.DeepCopy(), argocd.SSDOptions{
			Options: opts, IgnoreMutationWebhook: !s.IncludeMutationWebhook, Manager: argocd.ServerSideDiffManager, TypeConverter: tc,
		})
	}
	opts, n := s.options(ctx, true)
	with, err := ssd(predicted, opts)
	if err != nil {
		return nil, fmt.Errorf("server-side diff of %s: %w", cluster.RefOf(desired), err)
	}
	var without *argocd.Result
	if n != nil || len(ignored) > 0 {
		plainOpts, _ := s.options(ctx, false)
		if without, err = ssd(plain, plainOpts); err != nil {
			return nil, fmt.Errorf("server-side diff of %s: %w", cluster.RefOf(desired), err)
		}
		if n != nil {
			for p, r := range n.matches {
				ignored[p] = r
			}
		}
	}
	report(out, with, without, ignored, live)
	return out, nil
}
