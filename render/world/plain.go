package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/helm"
)

// plainWorld reads paths that are no Flux cluster directory: their files
// (a Helm chart directory is rendered, as Argo CD would render it for an
// Application pointing at it), then every unit they define.
func (l *loader) plainWorld(ctx context.Context, paths []string) (*World, error) {
	s := &state{loader: l, w: &World{Name: strings.Join(paths, " ")}, seen: map[manifest.Unit]bool{}, origins: map[string]map[string]string{}}
	var objs []manifest.Object
	var loadErr error
	for _, p := range paths {
		got, notes, err := l.entryFiles(ctx, p)
		objs = append(objs, got...)
		s.w.Notes = append(s.w.Notes, notes...)
		if err != nil {
			loadErr = err
			break
		}
	}
	if loadErr != nil {
		return nil, loadErr
	}
	if info, err := os.Stat(paths[0]); err == nil && info.IsDir() {
		s.first = paths[0]
	}
	if !s.followable(objs) {
		// Nothing to render: the files as they are, each Application
		// and Kustomization taking the manifests under its path.
		return &World{Objects: objs, Notes: s.w.Notes}, nil
	}
	if info, err := os.Stat(paths[0]); err == nil && info.IsDir() {
		s.dir = paths[0]
	}
	if err := s.add(ctx, manifest.Unit{}, objs); err != nil {
		return nil, err
	}
	s.w.Units = order(s.w.Units)
	return s.w, nil
}

// local reports whether path names a directory under the first path
// given: an Application of a hand-made layout, whose repository is the
// directory checked whatever its repoURL says.
func (s *state) local(path string) bool {
	if s.first == "" || path == "" {
		return true
	}
	dir, err := inRoot(s.root, s.first, path)
	if err != nil {
		return true
	}
	info, err := os.Stat(dir)
	return err == nil && info.IsDir()
}

// followable reports whether objs define a unit whose source truce reads:
// an Application of this repository, of a chart, or of another
// repository whose path is not beside it; a Kustomization of a
// GitRepository in the repository (or the bootstrap one) or of an
// ExternalArtifact; a HelmRelease; an ApplicationSet. Without one, the repository is a
// hand-made layout and read as it always was.
func (s *state) followable(objs []manifest.Object) bool {
	s.w.Objects = objs
	defer func() { s.w.Objects = nil }()
	for _, o := range objs {
		u, ok := s.define(o, manifest.Unit{})
		if !ok {
			continue
		}
		switch u.Kind {
		case KindHelmRelease, KindApplicationSet:
			return true
		case KindApplication:
			var app argoApplication
			if decodeSpec(o.Object, &app) != nil {
				continue
			}
			sources := app.Spec.Sources
			if app.Spec.Source != nil {
				sources = append(sources, *app.Spec.Source)
			}
			for _, src := range sources {
				if src.Chart != "" || s.repos.has(src.RepoURL) || !s.local(src.Path) {
					return true
				}
			}
		case KindKustomization:
			kind, _, _ := unstructured.NestedString(o.Object.Object, "spec", "sourceRef", "kind")
			name, _, _ := unstructured.NestedString(o.Object.Object, "spec", "sourceRef", "name")
			ns, _, _ := unstructured.NestedString(o.Object.Object, "spec", "sourceRef", "namespace")
			if ns == "" {
				ns = o.Object.GetNamespace()
			}
			if kind == "ExternalArtifact" {
				return true
			}
			if _, ok := s.find(sourceGroup, kind, ns, name); ok || ns == fluxSystem && name == fluxSystem {
				return true
			}
		}
	}
	return false
}

// entryFiles reads one path given: a chart directory is rendered with
// its default values and the directory's name as release name; anything
// else is read as manifest.LoadPaths reads it, a chart directory found
// below it rendered the same way (a repository of several apps, such as
// argocd-example-apps, holds charts beside plain directories). A chart
// below the path that truce cannot render offline (a dependency from a
// chart repository it cannot reach) is left out with a note, as a unit
// would be reported Unpredictable, rather than failing the whole read.
func (l *loader) entryFiles(ctx context.Context, p string) (objs []manifest.Object, notes []string, err error) {
	if _, err := os.Stat(filepath.Join(p, "Chart.yaml")); err == nil {
		objs, err := l.chartFiles(ctx, p)
		return objs, nil, err
	}
	opts := l.opts.Render.Manifest
	opts.Chart = func(ctx context.Context, dir string) ([]manifest.Object, error) {
		objs, err := l.chartFiles(ctx, dir)
		if up, ok := render.AsUnpredictable(err); ok {
			notes = append(notes, fmt.Sprintf("%s: Helm chart not read: %v", dir, up))
			return nil, nil
		}
		return objs, err
	}
	objs, err = manifest.LoadPaths(ctx, []string{p}, opts)
	return objs, notes, err
}

// chartFiles renders the chart in dir with its default values, the
// directory's name as release name, in namespace default.
func (l *loader) chartFiles(ctx context.Context, dir string) ([]manifest.Object, error) {
	ch, err := helm.Load(ctx, dir, helm.LoadOptions{Puller: &helm.Puller{CacheDir: l.opts.Render.CacheDir, Offline: l.opts.Render.Offline, RegistryConfig: l.opts.RegistryConfig, RepositoryConfig: l.opts.RepositoryConfig}, RepositoryRoot: l.root})
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(dir)
	out, err := helm.Render(ctx, ch, helm.Release{Name: filepath.Base(abs), Namespace: "default", IncludeCRDs: true}, nil, l.opts.Render)
	if err != nil {
		return nil, err
	}
	return out.Objects, nil
}
