package world

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// maxUnits bounds how many units one world may follow: an app of apps
// that renders itself, or a generator gone wrong, stops with a message.
const maxUnits = 2000

// state is one world being read.
type state struct {
	*loader
	w *World
	// seen are the units already followed.
	seen map[manifest.Unit]bool
	// origins maps, per artifact directory, its files to the files of
	// the repository they were copied from.
	origins map[string]map[string]string
	// first is the first path given, when a directory.
	first string
	// dir is where Applications whose repository is not this checkout
	// look for their path (the first path given), "" for none.
	dir string
}

// add records objects of unit u (zero: the entry point's own files) and
// follows the units they define.
func (s *state) add(ctx context.Context, u manifest.Unit, objs []manifest.Object) error {
	queue := []pending{{unit: u, objs: objs}}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := queue[0]
		queue = queue[1:]
		for i := range p.objs {
			p.objs[i].Source.Unit = p.unit
			s.shorten(&p.objs[i].Source)
		}
		s.w.Objects = append(s.w.Objects, p.objs...)
		for _, o := range p.objs {
			child, ok := s.define(o, p.unit)
			if !ok || s.seen[child.Unit] {
				continue
			}
			if len(s.w.Units) >= maxUnits {
				return fmt.Errorf("%s: more than %d Applications, Kustomizations and HelmReleases to follow; is an app of apps rendering itself?", o.Source, maxUnits)
			}
			s.seen[child.Unit] = true
			s.w.Units = append(s.w.Units, child)
			got, err := s.render(ctx, child, o)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				child.Problem = err
				continue
			}
			child.Objects = len(got)
			queue = append(queue, pending{unit: child.Unit, objs: got})
		}
	}
	return nil
}

type pending struct {
	unit manifest.Unit
	objs []manifest.Object
}

// define returns the unit o defines, if it is one truce follows.
func (s *state) define(o manifest.Object, parent manifest.Unit) (*Unit, bool) {
	gvk := o.Object.GroupVersionKind()
	var kind, tool string
	switch {
	case gvk.Group == "argoproj.io" && gvk.Kind == KindApplication:
		kind, tool = KindApplication, "argocd"
	case gvk.Group == "kustomize.toolkit.fluxcd.io" && gvk.Kind == KindKustomization:
		kind, tool = KindKustomization, "flux"
	case gvk.Group == "helm.toolkit.fluxcd.io" && gvk.Kind == KindHelmRelease:
		kind, tool = KindHelmRelease, "flux"
	case gvk.Group == "argoproj.io" && gvk.Kind == KindApplicationSet:
		kind, tool = KindApplicationSet, "argocd"
	default:
		return nil, false
	}
	u := &Unit{
		Unit:   manifest.Unit{Kind: kind, Namespace: o.Object.GetNamespace(), Name: o.Object.GetName()},
		Tool:   tool,
		Source: o.Source,
		Parent: parent,
	}
	if kind != KindApplication {
		u.DependsOn = dependsOn(o.Object, kind)
	} else {
		u.Wave = syncWave(o.Object)
	}
	u.Cluster = destination(o.Object, kind)
	return u, true
}

// render renders what a unit applies.
func (s *state) render(ctx context.Context, u *Unit, o manifest.Object) ([]manifest.Object, error) {
	switch u.Kind {
	case KindApplication:
		return s.application(ctx, u, o.Object)
	case KindKustomization:
		return s.kustomization(ctx, u, o.Object)
	case KindHelmRelease:
		return s.helmRelease(ctx, u, o.Object)
	case KindApplicationSet:
		return s.applicationSet(ctx, u, o)
	}
	return nil, fmt.Errorf("unknown unit kind %s", u.Kind)
}

// dependsOn reads spec.dependsOn: names in the unit's namespace unless
// given.
func dependsOn(obj *unstructured.Unstructured, kind string) []manifest.Unit {
	deps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "dependsOn")
	var out []manifest.Unit
	for _, d := range deps {
		m, ok := d.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		if ns == "" {
			ns = obj.GetNamespace()
		}
		if name != "" {
			out = append(out, manifest.Unit{Kind: kind, Namespace: ns, Name: name})
		}
	}
	return out
}

// unpredictable is a render.Unpredictable error.
func unpredictable(subject, format string, args ...any) error {
	return &render.Unpredictable{Subject: subject, Reason: fmt.Sprintf(format, args...)}
}

// objects of the world so far, as unstructured, for generators and
// substitution that read ConfigMaps, Secrets and sources.
func (s *state) objects() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(s.w.Objects))
	for i, o := range s.w.Objects {
		out[i] = o.Object
	}
	return out
}

// find returns the object of the world with that group, kind, namespace
// and name.
func (s *state) find(group, kind, namespace, name string) (*unstructured.Unstructured, bool) {
	for _, o := range s.w.Objects {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group == group && gvk.Kind == kind && o.Object.GetNamespace() == namespace && o.Object.GetName() == name {
			return o.Object, true
		}
	}
	return nil, false
}

// shorten writes the paths of a position relative to the working
// directory when they are below it, as files named on the command line
// are shown.
func (s *state) shorten(src *manifest.Source) {
	for _, p := range []*string{&src.File, &src.Kustomization, &src.RenderRoot} {
		if label, ok := s.label(*p); ok {
			*p = label
			continue
		}
		if !filepath.IsAbs(*p) || s.wd == "" {
			continue
		}
		if rel, err := filepath.Rel(s.wd, *p); err == nil && !strings.HasPrefix(rel, "..") {
			*p = rel
		}
	}
}
