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
	out := make([]ignore.Rule, 0, len(k.Ignore))
	for i, ig := range k.Ignore {
		r := ignore.Rule{
			Tool:         ignore.Flux,
			Source:       k.Source.String(),
			Field:        fmt.Sprintf("spec.ignore[%d]", i),
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
	if v := r.str(m, "spec.interval", "spec", "interval"); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			r.fail("spec.interval", "%q is not a duration such as 10m or 1h30m", v)
		case d <= 0:
			r.fail("spec.interval", "must be positive, got %s", v)
		default:
			k.Interval = d
		}
	}
	for i, e := range r.maps(m, "spec.ignore", "spec", "ignore") {
		if e == nil {
			continue
		}
		f := fmt.Sprintf("spec.ignore[%d]", i)
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
		k.Ignore = append(k.Ignore, ig)
	}
	if err := errors.Join(r.err(), ruleErrors(k.Rules())); err != nil {
		return nil, nil, err
	}
	return k, nil, nil
}
