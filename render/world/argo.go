package world

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/argocd"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/jsonnet"
)

// argoApplication is the part of an Application's spec that says what to
// render, spelt as Argo CD's API spells it.
type argoApplication struct {
	Spec struct {
		Source      *argoSource  `json:"source"`
		Sources     []argoSource `json:"sources"`
		Project     string       `json:"project"`
		Destination struct {
			Server    string `json:"server"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"destination"`
		SyncPolicy struct {
			SyncOptions []string `json:"syncOptions"`
		} `json:"syncPolicy"`
	} `json:"spec"`
}

type argoSource struct {
	RepoURL        string         `json:"repoURL"`
	Path           string         `json:"path"`
	TargetRevision string         `json:"targetRevision"`
	Chart          string         `json:"chart"`
	Ref            string         `json:"ref"`
	Helm           *argoHelm      `json:"helm"`
	Kustomize      *argoKustomize `json:"kustomize"`
	Directory      *argoDirectory `json:"directory"`
	Plugin         map[string]any `json:"plugin"`
	// pointer is the source's JSON pointer in the Application.
	pointer string
}

type argoHelm struct {
	ReleaseName  string         `json:"releaseName"`
	Namespace    string         `json:"namespace"`
	ValueFiles   []string       `json:"valueFiles"`
	Values       string         `json:"values"`
	ValuesObject map[string]any `json:"valuesObject"`
	Parameters   []struct {
		Name        string `json:"name"`
		Value       string `json:"value"`
		ForceString bool   `json:"forceString"`
	} `json:"parameters"`
	FileParameters []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"fileParameters"`
	SkipCrds                bool     `json:"skipCrds"`
	SkipTests               bool     `json:"skipTests"`
	IgnoreMissingValueFiles bool     `json:"ignoreMissingValueFiles"`
	KubeVersion             string   `json:"kubeVersion"`
	APIVersions             []string `json:"apiVersions"`
}

type argoKustomize struct {
	NamePrefix                string            `json:"namePrefix"`
	NameSuffix                string            `json:"nameSuffix"`
	Namespace                 string            `json:"namespace"`
	Images                    []string          `json:"images"`
	CommonLabels              map[string]string `json:"commonLabels"`
	CommonAnnotations         map[string]string `json:"commonAnnotations"`
	LabelWithoutSelector      bool              `json:"labelWithoutSelector"`
	ForceCommonLabels         bool              `json:"forceCommonLabels"`
	ForceCommonAnnotations    bool              `json:"forceCommonAnnotations"`
	LabelIncludeTemplates     bool              `json:"labelIncludeTemplates"`
	CommonAnnotationsEnvsubst bool              `json:"commonAnnotationsEnvsubst"`
	IgnoreMissingComponents   bool              `json:"ignoreMissingComponents"`
	Patches                   []map[string]any  `json:"patches"`
	Components                []string          `json:"components"`
	Replicas                  []struct {
		Name  string             `json:"name"`
		Count intstr.IntOrString `json:"count"`
	} `json:"replicas"`
}

type argoDirectory struct {
	Recurse bool   `json:"recurse"`
	Include string `json:"include"`
	Exclude string `json:"exclude"`
	Jsonnet struct {
		Libs    []string     `json:"libs"`
		ExtVars []jsonnetVar `json:"extVars"`
		TLAs    []jsonnetVar `json:"tlas"`
	} `json:"jsonnet"`
}

type jsonnetVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Code  bool   `json:"code"`
}

func decodeSpec(obj *unstructured.Unstructured, into any) error {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// application renders an Application's sources, in order, as the
// repo-server does; their objects are what it applies.
func (s *state) application(ctx context.Context, u *Unit, obj *unstructured.Unstructured) ([]manifest.Object, error) {
	var app argoApplication
	if err := decodeSpec(obj, &app); err != nil {
		return nil, fmt.Errorf("%s: reading the Application: %w", u.Source, err)
	}
	// Set by the source rendering a chart; two charts leave no place.
	u.Values = nil
	sources := app.Spec.Sources
	for i := range sources {
		sources[i].pointer = fmt.Sprintf("/spec/sources/%d", i)
	}
	if app.Spec.Source != nil && len(sources) == 0 {
		sources = []argoSource{*app.Spec.Source}
		sources[0].pointer = "/spec/source"
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("%s: the Application has no source", u.Source)
	}
	refs := map[string]string{}
	for _, src := range sources {
		if src.Ref == "" {
			continue
		}
		if dir, _, err := s.repoDir(ctx, src.RepoURL, src.TargetRevision, ""); err == nil {
			refs["$"+src.Ref] = dir
		}
	}
	var out []manifest.Object
	for i, src := range sources {
		if src.Ref != "" && src.Path == "" && src.Chart == "" {
			continue // only provides $ref value files
		}
		got, err := s.argoSource(ctx, u, obj, app, src, refs)
		if err != nil {
			if len(sources) > 1 {
				return nil, fmt.Errorf("spec.sources[%d]: %w", i, err)
			}
			return nil, err
		}
		out = append(out, got...)
	}
	out = withoutHooks(out, u)
	ns := app.Spec.Destination.Namespace
	u.DefaultNamespace = ns
	for _, opt := range app.Spec.SyncPolicy.SyncOptions {
		if opt == "CreateNamespace=true" && ns != "" && !hasNamespace(out, ns) {
			nsObj := &unstructured.Unstructured{}
			nsObj.SetAPIVersion("v1")
			nsObj.SetKind("Namespace")
			nsObj.SetName(ns)
			s.w.Base = append(s.w.Base, manifest.Object{Source: u.Source, Object: nsObj})
		}
	}
	return out, nil
}

// withoutHooks leaves out Argo CD's hooks (argocd.argoproj.io/hook, and
// helm.sh/hook which Argo CD maps to its hooks): it runs them in their
// sync phases, and they are not part of the Application's sync status.
func withoutHooks(objs []manifest.Object, u *Unit) []manifest.Object {
	out := objs[:0]
	for _, o := range objs {
		a := o.Object.GetAnnotations()
		_, argo := a["argocd.argoproj.io/hook"]
		_, helmHook := a["helm.sh/hook"]
		if argo || helmHook {
			u.Hooks++
			continue
		}
		out = append(out, o)
	}
	return out
}

func hasNamespace(objs []manifest.Object, ns string) bool {
	for _, o := range objs {
		if o.Object.GetKind() == "Namespace" && o.Object.GetAPIVersion() == "v1" && o.Object.GetName() == ns {
			return true
		}
	}
	return false
}

// repoDir is where a source of repoURL at path is read: this checkout's
// working tree when the URL names it; the directory given on the command
// line when the path is there (the hand-made layout: Applications next
// to the directories they point at); else a checkout of the repository
// at revision. root is the repository the directory belongs to, which
// renderers are confined to.
func (s *state) repoDir(ctx context.Context, repoURL, revision, path string) (dir, root string, err error) {
	if s.repos.has(repoURL) {
		dir, err := inRoot(s.root, s.root, path)
		return dir, s.root, err
	}
	if s.dir != "" {
		if dir, err := inRoot(s.root, s.dir, path); err == nil {
			if _, err := os.Stat(dir); err == nil {
				return dir, s.root, nil
			}
		}
	}
	if root, err = s.checkout(ctx, repoURL, revision); err != nil {
		return "", "", err
	}
	dir, err = inRoot(root, root, path)
	return dir, root, err
}

// inRoot joins path to base, refusing paths that leave root (absolute:
// a base given relative to the working directory is made absolute first,
// or it could never be found inside root).
func inRoot(root, base, path string) (string, error) {
	if !filepath.IsAbs(base) {
		a, err := filepath.Abs(base)
		if err != nil {
			return "", err
		}
		base = a
	}
	dir := filepath.Join(base, filepath.FromSlash(path))
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leaves the repository", path)
	}
	return dir, nil
}

// argoSource renders one source.
func (s *state) argoSource(ctx context.Context, u *Unit, obj *unstructured.Unstructured, app argoApplication, src argoSource, refs map[string]string) ([]manifest.Object, error) {
	ropts := s.opts.Render
	if src.Plugin != nil {
		return nil, unpredictable("config management plugin", "truce does not run Argo CD plugins")
	}
	if src.Chart != "" {
		ch, err := s.puller().Pull(ctx, helm.Ref{RepoURL: src.RepoURL, Chart: src.Chart, Version: src.TargetRevision})
		if err != nil {
			return nil, err
		}
		return s.argoHelm(ctx, u, obj, app, src, ch, "", "", refs)
	}
	dir, root, err := s.repoDir(ctx, src.RepoURL, src.TargetRevision, src.Path)
	if err != nil {
		return nil, err
	}
	ropts.Manifest.RepositoryRoot = root
	typ, err := argocd.SourceType(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var set []argocd.Type
	if src.Helm != nil {
		set = append(set, argocd.TypeHelm)
	}
	if src.Kustomize != nil {
		set = append(set, argocd.TypeKustomize)
	}
	if src.Directory != nil {
		set = append(set, argocd.TypeDirectory)
	}
	if len(set) > 0 {
		if typ, err = argocd.ExplicitType(set...); err != nil {
			return nil, err
		}
	}
	env := argocd.App{Name: obj.GetName(), Namespace: app.Spec.Destination.Namespace, Project: app.Spec.Project,
		TargetRevision: src.TargetRevision, RepoURL: src.RepoURL, Path: src.Path}.Env()
	switch typ {
	case argocd.TypeHelm:
		ch, err := s.loadChart(ctx, dir, root)
		if err != nil {
			return nil, err
		}
		return s.argoHelm(ctx, u, obj, app, src, ch, dir, root, refs)
	case argocd.TypeKustomize:
		spec := argocd.KustomizeSpec{Env: env}
		if k := src.Kustomize; k != nil {
			spec = argocd.KustomizeSpec{
				NamePrefix: k.NamePrefix, NameSuffix: k.NameSuffix, Namespace: k.Namespace,
				Images: k.Images, CommonLabels: k.CommonLabels, CommonAnnotations: k.CommonAnnotations,
				LabelWithoutSelector: k.LabelWithoutSelector, LabelIncludeTemplates: k.LabelIncludeTemplates,
				ForceCommonLabels: k.ForceCommonLabels, ForceCommonAnnotations: k.ForceCommonAnnotations,
				CommonAnnotationsEnvsubst: k.CommonAnnotationsEnvsubst, Patches: k.Patches,
				Components: k.Components, IgnoreMissingComponents: k.IgnoreMissingComponents, Env: env,
			}
			for _, r := range k.Replicas {
				spec.Replicas = append(spec.Replicas, argocd.Replica{Name: r.Name, Count: r.Count})
			}
		}
		return argocd.Kustomize(ctx, dir, spec, ropts)
	case argocd.TypeDirectory:
		spec := argocd.DirectorySpec{Env: env}
		if d := src.Directory; d != nil {
			spec.Recurse, spec.Include, spec.Exclude = d.Recurse, d.Include, d.Exclude
			spec.Jsonnet.Libs = d.Jsonnet.Libs
			spec.Jsonnet.ExtVars = jsonnetVars(d.Jsonnet.ExtVars)
			spec.Jsonnet.TLAs = jsonnetVars(d.Jsonnet.TLAs)
		}
		return argocd.Directory(ctx, dir, spec, ropts)
	}
	return nil, unpredictable("source "+src.Path, "Argo CD renders it with a plugin, which truce does not run")
}

func jsonnetVars(in []jsonnetVar) []jsonnet.Var {
	out := make([]jsonnet.Var, len(in))
	for i, v := range in {
		out[i] = jsonnet.Var{Name: v.Name, Value: v.Value, Code: v.Code}
	}
	return out
}

// argoHelm renders a chart as `helm template` does when Argo CD calls it.
// dir and root are the chart's directory and repository, both empty for a
// chart from a chart repository.
func (s *state) argoHelm(ctx context.Context, u *Unit, obj *unstructured.Unstructured, app argoApplication, src argoSource, ch *helm.Chart, dir, root string, refs map[string]string) ([]manifest.Object, error) {
	h := src.Helm
	if h == nil {
		h = &argoHelm{}
	}
	vals := helm.ArgoValues{Files: h.ValueFiles, IgnoreMissingValueFiles: h.IgnoreMissingValueFiles,
		Values: h.Values, ValuesObject: h.ValuesObject, RepositoryRoot: root, RefSources: map[string]string{},
		MaxFileBytes: s.opts.Render.Manifest.MaxFileBytes}
	for _, f := range h.ValueFiles {
		if ref, _, ok := strings.Cut(f, "/"); ok && strings.HasPrefix(ref, "$") {
			root, found := refs[ref]
			if !found {
				return nil, unpredictable("value file "+f, "its source %s is not this repository", ref)
			}
			vals.RefSources[ref] = root
		}
	}
	for _, p := range h.Parameters {
		vals.Parameters = append(vals.Parameters, helm.Parameter{Name: p.Name, Value: p.Value, ForceString: p.ForceString})
	}
	for _, p := range h.FileParameters {
		vals.FileParameters = append(vals.FileParameters, helm.FileParameter{Name: p.Name, Path: p.Path})
	}
	pulled := dir == ""
	if pulled {
		dir, vals.RepositoryRoot = ch.Dir, ch.Dir
	}
	values, err := vals.Merge(ctx, dir, s.puller())
	if err != nil {
		return nil, err
	}
	rel := helm.Release{Name: h.ReleaseName, Namespace: h.Namespace, IncludeCRDs: !h.SkipCrds, SkipTests: h.SkipTests}
	if rel.Name == "" {
		rel.Name = obj.GetName()
	}
	if rel.Namespace == "" {
		rel.Namespace = app.Spec.Destination.Namespace
	}
	ropts := s.opts.Render
	if h.KubeVersion != "" {
		ropts.KubeVersion = h.KubeVersion
	}
	ropts.APIVersions = append(append([]string(nil), ropts.APIVersions...), h.APIVersions...)
	out, err := helm.Render(ctx, ch, rel, values, ropts)
	if err != nil {
		return nil, err
	}
	effective, err := ch.EffectiveValues(values)
	if err != nil {
		return nil, err
	}
	if u.Values != nil {
		u.Values = &ValuesTarget{Source: u.Source, Reason: "the Application renders several Helm charts; truce writes values of one only"}
		return out.Objects, nil
	}
	u.Values = &ValuesTarget{Source: u.Source, Pointer: src.pointer + "/helm/valuesObject", Parameters: src.pointer + "/helm/parameters", Values: effective,
		Probe: func(values map[string]any) ([]manifest.Object, error) {
			out, err := helm.Render(ctx, ch, rel, values, ropts)
			if err != nil {
				return nil, err
			}
			return out.Objects, nil
		}}
	if !pulled {
		if own := filepath.Join(dir, "values.yaml"); fileExists(own) {
			u.Values.Files = append(u.Values.Files, s.valuesFile(own))
		}
	}
	files, err := vals.LocalFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		u.Values.Files = append(u.Values.Files, s.valuesFile(f))
	}
	switch {
	case u.Parent.Kind == KindApplicationSet:
		u.Values.Reason = fmt.Sprintf("the Application is generated by ApplicationSet %s; change its template", u.Parent.Name)
	case u.Source.Renderer != "":
		u.Values.Reason = fmt.Sprintf("the Application is itself rendered by the %s %s", u.Source.Renderer, u.Source.RenderRoot)
	case h.Values != "" && h.ValuesObject == nil:
		u.Values.Reason = "the Application's values are a YAML string (helm.values); move them to valuesObject"
	}
	// Argo CD applies hooks in their phases; they are not part of the
	// sync status, and truce leaves them out of the comparison.
	return out.Objects, nil
}

// loadChart loads a chart directory of the repository, pulling missing
// dependencies as `helm dependency build` would.
func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// valuesFile names a values file: by its path in the repository being
// checked when it is there (Helm resolves symlinks), else as found, not
// the user's to edit.
func (s *state) valuesFile(p string) ValuesFile {
	rootReal, err := filepath.EvalSymlinks(s.root)
	if err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if rel, err := filepath.Rel(rootReal, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return ValuesFile{Path: filepath.Join(s.root, rel)}
			}
		}
	}
	return ValuesFile{Path: p, NotOwned: "it belongs to another repository, cloned to read it"}
}

func (s *state) loadChart(ctx context.Context, dir, root string) (*helm.Chart, error) {
	return helm.Load(ctx, dir, helm.LoadOptions{Puller: s.puller(), RepositoryRoot: root})
}

func (s *state) puller() *helm.Puller {
	return &helm.Puller{CacheDir: s.opts.Render.CacheDir, Offline: s.opts.Render.Offline, RegistryConfig: s.opts.RegistryConfig, RepositoryConfig: s.opts.RepositoryConfig}
}
