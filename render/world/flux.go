package world

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/flux"
	"github.com/truce-dev/truce/render/helm"
)

// Flux's bootstrap names.
const (
	fluxSystem        = "flux-system"
	sourceGroup       = "source.toolkit.fluxcd.io"
	sourceExtGroup    = "source.extensions.fluxcd.io"
	kustomizeGroup    = "kustomize.toolkit.fluxcd.io"
	defaultFluxBranch = "main"
)

// fluxEntries finds the cluster directories under p: directories holding
// a flux-system directory with gotk-sync.yaml or gotk-components.yaml, as
// `flux bootstrap` writes them. Hidden directories are not searched.
func fluxEntries(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil || !info.IsDir() {
		return nil, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != p && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.Name() != fluxSystem {
			return nil
		}
		for _, f := range []string{"gotk-sync.yaml", "gotk-components.yaml"} {
			if _, err := os.Stat(filepath.Join(path, f)); err == nil {
				out = append(out, filepath.Dir(path))
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking for Flux cluster directories in %s: %w", p, err)
	}
	return out, nil
}

// fluxWorld reads one cluster directory as Flux does after bootstrap: the
// flux-system Kustomization syncs the directory from this repository, and
// everything it applies is followed.
func (l *loader) fluxWorld(ctx context.Context, dir string) (*World, error) {
	s := &state{loader: l, w: &World{Name: l.rel(dir)}, seen: map[manifest.Unit]bool{}, origins: map[string]map[string]string{}}
	sync, err := manifest.LoadPaths(ctx, []string{filepath.Join(dir, fluxSystem, "gotk-sync.yaml")}, l.opts.Render.Manifest)
	if err != nil {
		sync = nil
	}
	var root *manifest.Object
	for i, o := range sync {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group == kustomizeGroup && gvk.Kind == KindKustomization {
			root = &sync[i]
		}
	}
	if root == nil {
		repo, k := bootstrap(l.rel(dir), l.opts.RepoURLs)
		src := manifest.Source{File: filepath.Join(dir, fluxSystem, "gotk-sync.yaml")}
		s.w.Notes = append(s.w.Notes, fmt.Sprintf("%s holds no Kustomization: synced as `flux bootstrap` would set it up (Kustomization flux-system/flux-system over ./%s of this repository)", src.File, l.rel(dir)))
		s.w.Base = append(s.w.Base, manifest.Object{Source: src, Object: repo})
		sync = []manifest.Object{{Source: src, Object: repo}, {Source: src, Object: k}}
	}
	// flux bootstrap installs Flux in flux-system before anything syncs.
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": fluxSystem}}}
	s.w.Base = append(s.w.Base, manifest.Object{Source: manifest.Source{File: filepath.Join(dir, fluxSystem)}, Object: ns})
	if err := s.add(ctx, manifest.Unit{}, sync); err != nil {
		return nil, err
	}
	s.w.Objects = withoutRestated(s.w.Objects)
	s.w.Units = order(s.w.Units)
	return s.w, nil
}

// bootstrap returns the GitRepository and Kustomization `flux bootstrap`
// generates for a cluster directory.
func bootstrap(path string, urls []string) (repo, k *unstructured.Unstructured) {
	url := "ssh://git@localhost/this-repository"
	if len(urls) > 0 {
		url = urls[0]
	}
	repo = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sourceGroup + "/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": fluxSystem, "namespace": fluxSystem},
		"spec": map[string]any{"interval": "1m0s", "ref": map[string]any{"branch": defaultFluxBranch},
			"secretRef": map[string]any{"name": fluxSystem}, "url": url},
	}}
	k = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kustomizeGroup + "/v1", "kind": KindKustomization,
		"metadata": map[string]any{"name": fluxSystem, "namespace": fluxSystem},
		"spec": map[string]any{"interval": "10m0s", "path": "./" + path, "prune": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": fluxSystem}},
	}}
	return repo, k
}

// sourceRoot is the directory a Flux source's artifact holds: this
// checkout for the bootstrap GitRepository or one whose URL names it, an
// ArtifactGenerator's copy for an ExternalArtifact.
func (s *state) sourceRoot(ctx context.Context, kind, namespace, name string) (string, error) {
	subject := fmt.Sprintf("%s %s/%s", kind, namespace, name)
	switch kind {
	case "GitRepository":
		obj, ok := s.find(sourceGroup, kind, namespace, name)
		if !ok {
			return "", fmt.Errorf("%s is not in the repository", subject)
		}
		url, _, _ := unstructured.NestedString(obj.Object, "spec", "url")
		if s.repos.has(url) || name == fluxSystem && namespace == fluxSystem {
			return s.root, nil
		}
		ref, err := s.gitRevision(ctx, subject, url, obj)
		if err != nil {
			return "", err
		}
		dir, err := s.checkout(ctx, url, ref)
		if _, ok := render.AsUnpredictable(err); err != nil && !ok && ctx.Err() == nil {
			// source-controller's wording for a ref it cannot check out.
			return "", fmt.Errorf("%s: failed to checkout and determine revision: %w", subject, err)
		}
		return dir, err
	case "ExternalArtifact":
		return s.artifact(ctx, namespace, name)
	case "OCIRepository":
		return s.ociSource(ctx, namespace, name)
	case "Bucket":
		return s.bucketSource(ctx, namespace, name)
	}
	return "", unpredictable(subject, "truce reads Kustomizations from GitRepository, OCIRepository, Bucket and ExternalArtifact sources only")
}

// artifact assembles an ArtifactGenerator's artifact into a temporary
// directory, as source-watcher does.
func (s *state) artifact(ctx context.Context, namespace, name string) (string, error) {
	subject := fmt.Sprintf("ExternalArtifact %s/%s", namespace, name)
	for _, o := range s.w.Objects {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group != sourceExtGroup || gvk.Kind != "ArtifactGenerator" || o.Object.GetNamespace() != namespace {
			continue
		}
		gen, err := parseArtifactGenerator(o.Object)
		if err != nil {
			return "", fmt.Errorf("%s: %w", o.Source, err)
		}
		rules, ok := gen.copyRules(name)
		if !ok {
			continue
		}
		roots := map[string]string{}
		for _, src := range gen.Spec.Sources {
			ns := src.Namespace
			if ns == "" {
				ns = namespace
			}
			root, err := s.sourceRoot(ctx, src.Kind, ns, src.Name)
			if err != nil {
				return "", err
			}
			roots[src.Alias] = root
		}
		tmp, err := os.MkdirTemp("", "truce-artifact-")
		if err != nil {
			return "", err
		}
		s.cleanup = append(s.cleanup, func() { os.RemoveAll(tmp) })
		if err := flux.ArtifactCopy(roots, rules, tmp); err != nil {
			return "", fmt.Errorf("%s: assembling artifact %s: %w", o.Source, name, err)
		}
		s.origins[tmp] = copiedFrom(tmp, roots)
		return tmp, nil
	}
	return "", fmt.Errorf("%s: no ArtifactGenerator in namespace %s produces it", subject, namespace)
}

// kustomization builds a Kustomization from its source, as
// kustomize-controller does.
func (s *state) kustomization(ctx context.Context, u *Unit, obj *unstructured.Unstructured) ([]manifest.Object, error) {
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(obj.Object, "spec", "sourceRef", "namespace")
	if ns == "" {
		ns = obj.GetNamespace()
	}
	root, err := s.sourceRoot(ctx, kind, ns, name)
	if err != nil {
		return nil, err
	}
	objs, err := flux.Build(ctx, obj, flux.BuildOptions{Root: root, Objects: s.objects(), Render: s.opts.Render})
	if err != nil {
		return nil, err
	}
	if _, copied := s.origins[root]; copied {
		// An ArtifactGenerator's copy; clones and OCI artifacts are
		// named by their labels.
		s.mapBack(objs, root)
	}
	return objs, nil
}

// mapBack points the positions of objects built from an artifact copy at
// the repository's files they were copied from.
func (s *state) mapBack(objs []manifest.Object, root string) {
	origins := s.origins[root]
	for i := range objs {
		for _, f := range []*string{&objs[i].Source.File, &objs[i].Source.Kustomization} {
			abs, err := filepath.Abs(*f)
			if err != nil {
				continue
			}
			if orig, ok := origins[abs]; ok {
				*f = orig
			} else if rel, err := filepath.Rel(root, abs); err == nil && !strings.HasPrefix(rel, "..") {
				*f = filepath.Join("<artifact>", rel)
			}
		}
	}
}

// copiedFrom maps each file of an artifact directory to the source file
// it was copied from: the one with the same content whose path ends with
// most of the artifact's path for it (two clusters' kustomization.yaml may
// be identical). A Merge strategy's result matches nothing and keeps its
// artifact path.
func copiedFrom(artifact string, roots map[string]string) map[string]string {
	byContent := map[[32]byte][]string{}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if data, err := os.ReadFile(p); err == nil {
				sum := sha256.Sum256(data)
				byContent[sum] = append(byContent[sum], p)
			}
			return nil
		})
	}
	out := map[string]string{}
	_ = filepath.WalkDir(artifact, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(artifact, p)
		if err != nil {
			return nil
		}
		best, score := "", -1
		for _, cand := range byContent[sha256.Sum256(data)] {
			if n := commonSuffix(strings.Split(filepath.ToSlash(cand), "/"), strings.Split(filepath.ToSlash(rel), "/")); n > score {
				best, score = cand, n
			}
		}
		if best != "" {
			out[p] = best
		}
		return nil
	})
	return out
}

// commonSuffix counts the trailing elements a and b share.
func commonSuffix(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// helmRelease renders a HelmRelease's chart as helm-controller installs
// it.
func (s *state) helmRelease(ctx context.Context, u *Unit, obj *unstructured.Unstructured) ([]manifest.Object, error) {
	hr, err := flux.ParseHelmRelease(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Source, err)
	}
	ch, err := s.fluxChart(ctx, hr)
	if err != nil {
		return nil, err
	}
	values, err := flux.Values(hr, s.objects())
	if err != nil {
		return nil, fmt.Errorf("%s: values: %w", u.Source, err)
	}
	ns := hr.TargetNamespace
	if ns == "" {
		ns = hr.Namespace
	}
	// Helm installs what names no namespace into the release's.
	u.DefaultNamespace = ns
	rel := helm.Release{Name: hr.ReleaseName, Namespace: ns, IncludeCRDs: hr.InstallCRDs != flux.CRDsSkip}
	out, err := helm.Render(ctx, ch, rel, values, s.opts.Render)
	if err != nil {
		return nil, err
	}
	effective, err := ch.EffectiveValues(values)
	if err != nil {
		return nil, err
	}
	ropts := s.opts.Render
	u.Values = &ValuesTarget{Source: u.Source, Pointer: "/spec/values", PostRenderers: "/spec/postRenderers", Values: effective,
		Probe: func(values map[string]any) ([]manifest.Object, error) {
			out, err := helm.Render(ctx, ch, rel, values, ropts)
			if err != nil {
				return nil, err
			}
			return flux.PostRender(out.Objects, hr)
		}}
	// A chart of this repository's working tree: its values are the
	// user's — values.yaml, or the chart's valuesFiles (paths in the
	// repository), which source-controller merges in order in its place.
	// valuesFrom win over them: then none is listed, and the inline
	// values, which win over them all, are written.
	if dir, ok := s.chartDir(hr); ok && len(hr.ValuesFrom) == 0 {
		if len(hr.Chart.ValuesFiles) == 0 {
			if own := filepath.Join(dir, "values.yaml"); fileExists(own) {
				u.Values.Files = append(u.Values.Files, s.valuesFile(own))
			}
		}
		for _, f := range hr.Chart.ValuesFiles {
			if p, err := inRoot(s.root, s.root, f); err == nil && fileExists(p) {
				u.Values.Files = append(u.Values.Files, s.valuesFile(p))
			}
		}
	}
	if u.Source.Renderer != "" {
		u.Values.Reason = fmt.Sprintf("the HelmRelease is itself rendered by the %s %s", u.Source.Renderer, u.Source.RenderRoot)
	}
	return flux.PostRender(out.Objects, hr)
}

// chartDir is the directory of a HelmRelease's chart when it is one of
// this repository's working tree (a GitRepository source of it).
func (s *state) chartDir(hr *flux.HelmRelease) (string, bool) {
	c := hr.Chart
	if c == nil || c.SourceRef.Kind != "GitRepository" {
		return "", false
	}
	ns := c.SourceRef.Namespace
	if ns == "" {
		ns = hr.Namespace
	}
	repo, ok := s.find(sourceGroup, "GitRepository", ns, c.SourceRef.Name)
	if !ok {
		return "", false
	}
	url, _, _ := unstructured.NestedString(repo.Object, "spec", "url")
	if !s.repos.has(url) && (c.SourceRef.Name != fluxSystem || ns != fluxSystem) {
		return "", false
	}
	dir, err := inRoot(s.root, s.root, c.Chart)
	return dir, err == nil
}

// withoutRestated drops the entry point's own copies of objects a unit
// applies too: gotk-sync.yaml is read to start, and the flux-system
// Kustomization applies it again from the cluster directory.
func withoutRestated(objs []manifest.Object) []manifest.Object {
	type id struct{ apiVersion, kind, namespace, name string }
	key := func(o manifest.Object) id {
		return id{o.Object.GetAPIVersion(), o.Object.GetKind(), o.Object.GetNamespace(), o.Object.GetName()}
	}
	applied := map[id]bool{}
	for _, o := range objs {
		if !o.Source.Unit.IsZero() {
			applied[key(o)] = true
		}
	}
	out := objs[:0]
	for _, o := range objs {
		if o.Source.Unit.IsZero() && applied[key(o)] {
			continue
		}
		out = append(out, o)
	}
	return out
}
