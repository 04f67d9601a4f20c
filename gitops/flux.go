package gitops

import (
	"errors"
	"fmt"
	"time"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

// FluxKustomization is a kustomize.toolkit.fluxcd.io Kustomization (v1, or
// v1beta2 read the same way).
type FluxKustomization struct {
	Source          manifest.Source
	APIVersion      string
	Name, Namespace string
	Path            string
	Prune, Force    bool
	TargetNamespace string
	// Interval is spec.interval: how often kustomize-controller reconciles
	// (and corrects drift) when nothing else triggers it.
	Interval time.Duration
	Ignore   []FluxIgnore
}

// FluxIgnore is one .spec.ignore entry. A nil Target selects every resource
// of the Kustomization.
type FluxIgnore struct {
	Paths  []string
	Target *ignore.Target
}

// Rules returns .spec.ignore as ignore rules.
func (k *FluxKustomization) Rules() []ignore.Rule {
	return fluxRules(k.Source, "spec.ignore", k.Ignore)
}

func fluxRules(source manifest.Source, field string, ignores []FluxIgnore) []ignore.Rule {
	out := make([]ignore.Rule, 0, len(ignores))
	for i, ig := range ignores {
		r := ignore.Rule{
			Tool:         ignore.Flux,
			Source:       source.String(),
			Field:        fmt.Sprintf("%s[%d]", field, i),
			JSONPointers: ig.Paths,
		}
		if ig.Target != nil {
			r.Target = *ig.Target
		}
		out = append(out, r)
	}
	return out
}

// ParseFluxKustomization reads a Kustomization.
func ParseFluxKustomization(o Object) (*FluxKustomization, []Warning, error) {
	r := &reader{source: o.where().String()}
	m := o.Object
	k := &FluxKustomization{
		Source:          o.where(),
		APIVersion:      o.GetAPIVersion(),
		Name:            o.GetName(),
		Namespace:       o.GetNamespace(),
		Path:            r.str(m, "spec.path", "spec", "path"),
		Prune:           r.boolean(m, "spec.prune", "spec", "prune"),
		Force:           r.boolean(m, "spec.force", "spec", "force"),
		TargetNamespace: r.str(m, "spec.targetNamespace", "spec", "targetNamespace"),
	}
	k.Interval = r.interval(m)
	k.Ignore = r.ignores(m, "spec.ignore", "spec", "ignore")
	if err := errors.Join(r.err(), ruleErrors(k.Rules())); err != nil {
		return nil, nil, err
	}
	return k, nil, nil
}

// FluxHelmRelease is a helm.toolkit.fluxcd.io HelmRelease, as far as
// comparing and simulating go; render/flux reads the rest.
type FluxHelmRelease struct {
	Source          manifest.Source
	Name, Namespace string
	// ReleaseName and TargetNamespace are spec.releaseName and
	// spec.targetNamespace as written (render/flux.ReleaseName derives the
	// Helm release's name from them).
	ReleaseName, TargetNamespace string
	Interval                     time.Duration
	// DriftDetection is spec.driftDetection.mode, HelmDriftDisabled when
	// not set (helm-controller's default).
	DriftDetection HelmDriftMode
	// InstallServerSideApply is spec.install.serverSideApply; nil leaves
	// helm-controller's default (server-side apply, with Helm 4).
	InstallServerSideApply *bool
	// Ignore is spec.driftDetection.ignore.
	Ignore []FluxIgnore
}

// HelmDriftMode is a HelmRelease's spec.driftDetection.mode.
type HelmDriftMode string

// The drift detection modes of helm-controller.
const (
	// HelmDriftDisabled: the cluster is not compared with the release.
	HelmDriftDisabled HelmDriftMode = "disabled"
	// HelmDriftWarn: drift is detected and reported, not corrected.
	HelmDriftWarn HelmDriftMode = "warn"
	// HelmDriftEnabled: drift is detected and corrected.
	HelmDriftEnabled HelmDriftMode = "enabled"
)

// Rules returns spec.driftDetection.ignore as ignore rules.
func (h *FluxHelmRelease) Rules() []ignore.Rule {
	return fluxRules(h.Source, "spec.driftDetection.ignore", h.Ignore)
}

// ParseFluxHelmRelease reads a HelmRelease.
func ParseFluxHelmRelease(o Object) (*FluxHelmRelease, error) {
	r := &reader{source: o.where().String()}
	m := o.Object
	h := &FluxHelmRelease{
		Source:          o.where(),
		Name:            o.GetName(),
		Namespace:       o.GetNamespace(),
		ReleaseName:     r.str(m, "spec.releaseName", "spec", "releaseName"),
		TargetNamespace: r.str(m, "spec.targetNamespace", "spec", "targetNamespace"),
	}
	h.Interval = r.interval(m)
	h.DriftDetection = r.driftMode(m)
	if v, ok := get(m, "spec", "install", "serverSideApply"); ok && v != nil {
		ssa := r.boolean(m, "spec.install.serverSideApply", "spec", "install", "serverSideApply")
		h.InstallServerSideApply = &ssa
	}
	h.Ignore = r.ignores(m, "spec.driftDetection.ignore", "spec", "driftDetection", "ignore")
	if err := errors.Join(r.err(), ruleErrors(h.Rules())); err != nil {
		return nil, err
	}
	return h, nil
}

// driftMode reads spec.driftDetection.mode.
func (r *reader) driftMode(m map[string]any) HelmDriftMode {
	const field = "spec.driftDetection.mode"
	switch v := HelmDriftMode(r.str(m, field, "spec", "driftDetection", "mode")); v {
	case "":
		return HelmDriftDisabled
	case HelmDriftDisabled, HelmDriftWarn, HelmDriftEnabled:
		return v
	default:
		r.fail(field, "%q is not one of enabled, warn or disabled", string(v))
		return HelmDriftDisabled
	}
}

// interval reads spec.interval.
func (r *reader) interval(m map[string]any) time.Duration {
	v := r.str(m, "spec.interval", "spec", "interval")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		r.fail("spec.interval", "%q is not a duration such as 10m or 1h30m", v)
	case d <= 0:
		r.fail("spec.interval", "must be positive, got %s", v)
	default:
		return d
	}
	return 0
}

// ignores reads a list of Flux ignore entries (paths and a target).
func (r *reader) ignores(m map[string]any, field string, path ...string) []FluxIgnore {
	var out []FluxIgnore
	for i, e := range r.maps(m, field, path...) {
		if e == nil {
			continue
		}
		f := fmt.Sprintf("%s[%d]", field, i)
		ig := FluxIgnore{Paths: r.strings(e, f+".paths", "paths")}
		if len(ig.Paths) == 0 {
			r.fail(f+".paths", "at least one JSON pointer is required")
		}
		if t := r.object(e, f+".target", "target"); t != nil {
			tf := f + ".target"
			ig.Target = &ignore.Target{
				Group:              r.str(t, tf+".group", "group"),
				Version:            r.str(t, tf+".version", "version"),
				Kind:               r.str(t, tf+".kind", "kind"),
				Name:               r.str(t, tf+".name", "name"),
				Namespace:          r.str(t, tf+".namespace", "namespace"),
				LabelSelector:      r.str(t, tf+".labelSelector", "labelSelector"),
				AnnotationSelector: r.str(t, tf+".annotationSelector", "annotationSelector"),
			}
		}
		out = append(out, ig)
	}
	return out
}
