package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/argocd"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/jsonnet"
)

// Render says how a GitSource renders a Helm chart or a Jsonnet directory
// at its path, with the renderers truce check uses. Kustomizations and
// plain YAML need nothing. The zero value renders with defaults.
type Render struct {
	// Options are CacheDir (chart dependencies pulled), Offline,
	// KubeVersion and APIVersions; Manifest is GitSource.Options.
	Options render.Options
	Helm    HelmRender
	Jsonnet JsonnetRender
}

// HelmRender is what helm template is told.
type HelmRender struct {
	// ReleaseName is .Release.Name; empty is the chart's name.
	ReleaseName string
	// Namespace is .Release.Namespace and the namespace of the rendered
	// namespaced objects that name none, as Helm installs them; empty is
	// "default".
	Namespace string
	// ValueFiles are --values files as Argo CD's helm.valueFiles: relative
	// to the chart directory, absolute meaning from the repository's top,
	// globs expanded; a missing file is an error.
	ValueFiles []string
	// Set are --set key=value, as Argo CD's helm.parameters: the value is
	// one string (a comma does not separate another key).
	Set []helm.Parameter
	// RegistryConfig and RepositoryConfig are Helm's credentials files
	// for the chart's dependencies from OCI registries and HTTP
	// repositories (--registry-config, --repository-config); empty: Helm's
	// registry config and Docker's, and anonymous HTTP.
	RegistryConfig, RepositoryConfig string
}

// JsonnetRender is what the programs of a Jsonnet directory are given, as
// an Argo CD directory source's jsonnet settings.
type JsonnetRender struct {
	ExtVars, TLAs []jsonnet.Var
	// Libs are library directories, from the repository's top.
	Libs []string
}

// sourceKind is how a GitSource reads its path.
type sourceKind int

const (
	kindManifests sourceKind = iota // plain YAML or a kustomization: manifest.LoadGit
	kindHelm
	kindJsonnet
)

// kindOf detects the path's kind as Argo CD's repo-server detects a
// source's type; a directory source is Jsonnet when it holds a .jsonnet
// file, and a file or a path that does not exist is left to the loader.
func kindOf(c *manifest.GitCommit) sourceKind {
	entries, err := c.ReadDir()
	if err != nil {
		return kindManifests
	}
	switch argocd.TypeOf(entries) {
	case argocd.TypeHelm:
		return kindHelm
	case argocd.TypeDirectory:
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".jsonnet") {
				return kindJsonnet
			}
		}
	}
	return kindManifests
}

// render checks c out into a scratch directory, renders the chart or the
// Jsonnet directory at its path and names the files in Sources and errors
// as manifest.LoadGit does ("repo@<commit>:path"), since the directory is
// gone once render returns. It returns the namespace of namespaced
// objects that name none ("" for "default").
func (r Render) render(ctx context.Context, c *manifest.GitCommit, kind sourceKind, mopts manifest.Options) ([]manifest.Object, string, error) {
	tmp, err := os.MkdirTemp("", "truce-sync-")
	if err != nil {
		return nil, "", fmt.Errorf("checking out %s to render it: %w", c.Label(), err)
	}
	defer os.RemoveAll(tmp)
	// Renderers resolve symlinks; the labels must match what they report.
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		return nil, "", fmt.Errorf("checking out %s to render it: %w", c.Label(), err)
	}
	if err := c.Checkout(ctx, tmp, mopts); err != nil {
		return nil, "", err
	}
	dir := filepath.Join(tmp, filepath.FromSlash(c.Path()))
	ropts := r.Options
	ropts.Manifest = mopts
	ropts.Manifest.RepositoryRoot = tmp
	var objs []manifest.Object
	namespace := ""
	if kind == kindHelm {
		objs, err = r.helm(ctx, dir, tmp, ropts)
		namespace = r.Helm.Namespace
	} else {
		objs, err = r.jsonnet(ctx, dir, ropts)
	}
	l := labeler{dir: tmp, label: c.Label()}
	for i := range objs {
		objs[i].Source.File = l.path(objs[i].Source.File)
		objs[i].Source.RenderRoot = l.path(objs[i].Source.RenderRoot)
	}
	if err != nil {
		return nil, "", &labeledError{err: err, l: l}
	}
	return objs, namespace, nil
}

// helm renders the chart in dir as helm template does, with the chart's
// dependencies from charts/ or pulled into the cache (Argo CD runs helm
// dependency build the same way). Hooks are left out: truce sync has no
// hook phases to run them in.
func (r Render) helm(ctx context.Context, dir, root string, ropts render.Options) ([]manifest.Object, error) {
	puller := &helm.Puller{CacheDir: ropts.CacheDir, Offline: ropts.Offline, RegistryConfig: r.Helm.RegistryConfig, RepositoryConfig: r.Helm.RepositoryConfig}
	ch, err := helm.Load(ctx, dir, helm.LoadOptions{Puller: puller, RepositoryRoot: root})
	if err != nil {
		return nil, err
	}
	vals := helm.ArgoValues{Files: r.Helm.ValueFiles, Parameters: r.Helm.Set, RepositoryRoot: root, MaxFileBytes: ropts.Manifest.MaxFileBytes}
	values, err := vals.Merge(ctx, dir, puller)
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", ch, err)
	}
	rel := helm.Release{Name: r.Helm.ReleaseName, Namespace: r.Helm.Namespace, IncludeCRDs: true}
	if rel.Name == "" {
		rel.Name = ch.Name()
	}
	out, err := helm.Render(ctx, ch, rel, values, ropts)
	if err != nil {
		return nil, err
	}
	return out.Objects, nil
}

// jsonnet reads dir as an Argo CD directory source without recurse: its
// .jsonnet files evaluated, its YAML and JSON files decoded.
func (r Render) jsonnet(ctx context.Context, dir string, ropts render.Options) ([]manifest.Object, error) {
	spec := argocd.DirectorySpec{Jsonnet: argocd.JsonnetSpec{
		Libs: r.Jsonnet.Libs, ExtVars: literal(r.Jsonnet.ExtVars), TLAs: literal(r.Jsonnet.TLAs),
	}}
	return argocd.Directory(ctx, dir, spec, ropts)
}

// literal escapes "$" in the values, which argocd.Directory would
// otherwise expand as Argo CD's $ARGOCD_APP_* variables: truce sync's
// values are used as given.
func literal(vars []jsonnet.Var) []jsonnet.Var {
	out := make([]jsonnet.Var, len(vars))
	for i, v := range vars {
		v.Value = strings.ReplaceAll(v.Value, "$", "$$")
		out[i] = v
	}
	return out
}

// labeler names the files of a checkout as manifest.LoadGit names a
// commit's files.
type labeler struct{ dir, label string }

func (l labeler) path(p string) string {
	if p == l.dir {
		return l.label
	}
	if rest, ok := strings.CutPrefix(p, l.dir+string(filepath.Separator)); ok {
		return l.label + ":" + filepath.ToSlash(rest)
	}
	return p
}

// labeledError is a rendering error whose message names the files of the
// checkout as labeler does; errors.Is and As see the renderer's error.
type labeledError struct {
	err error
	l   labeler
}

func (e *labeledError) Error() string {
	msg := strings.ReplaceAll(e.err.Error(), e.l.dir+string(filepath.Separator), e.l.label+":")
	return strings.ReplaceAll(msg, e.l.dir, e.l.label)
}

func (e *labeledError) Unwrap() error { return e.err }
