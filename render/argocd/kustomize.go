package argocd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// KustomizeSpec is spec.source.kustomize of an Application: the options
// Argo CD applies to the kustomization before building it.
type KustomizeSpec struct {
	NamePrefix, NameSuffix, Namespace string
	// Images are `kustomize edit set image` arguments: name=new:tag,
	// name:tag, name@digest...; $ARGOCD_APP_* are substituted.
	Images []string
	// CommonLabels values are substituted from Env; CommonAnnotations
	// values only with CommonAnnotationsEnvsubst.
	CommonLabels, CommonAnnotations map[string]string
	// LabelWithoutSelector adds the labels as a labels entry that leaves
	// selectors alone (with its templates too when LabelIncludeTemplates)
	// instead of commonLabels.
	LabelWithoutSelector, LabelIncludeTemplates bool
	// ForceCommonLabels and ForceCommonAnnotations overwrite labels and
	// annotations the kustomization already sets; without them that is an
	// error, as with `kustomize edit add label`.
	ForceCommonLabels, ForceCommonAnnotations bool
	CommonAnnotationsEnvsubst                 bool
	Replicas                                  []Replica
	// Patches are kustomize patches entries (path, patch, target,
	// options), appended to the kustomization's own.
	Patches []map[string]any
	// Components are added to the kustomization's components;
	// IgnoreMissingComponents skips those without a kustomization.
	Components              []string
	IgnoreMissingComponents bool
	// Env is the build environment, normally App.Env().
	Env map[string]string
}

// Replica is an entry of spec.source.kustomize.replicas.
type Replica struct {
	Name  string
	Count intstr.IntOrString
}

// Kustomize builds the kustomization in dir as Argo CD's repo-server does
// for a Kustomize source: the options in spec change the kustomization the
// way Argo CD's `kustomize edit set nameprefix/namesuffix/image/replicas/
// namespace` and `kustomize edit add label/annotation/component` commands
// and its patches edit do, in the same order, and the result is built by
// manifest.BuildKustomization (kustomize's krusty, confined to the
// repository, offline, objects traced to their files and lines). The
// kustomization in the repository is not modified.
//
// A remote base or resource, which Argo CD would fetch, makes the result
// *render.Unpredictable (joined with the underlying *manifest.Error).
// Argo CD's kustomize build options (--enable-helm, --load-restrictor)
// are not supported: builds are root-only and without Helm.
func Kustomize(ctx context.Context, dir string, spec KustomizeSpec, opts render.Options) ([]manifest.Object, error) {
	mopts := opts.Manifest
	root, err := repositoryRoot(dir, mopts.RepositoryRoot)
	if err != nil {
		return nil, fmt.Errorf("building the Argo CD kustomize source %s: %w", dir, err)
	}
	mopts.RepositoryRoot = root
	var edit manifest.KustomizationEdit
	if !spec.isZero() {
		file := kustomizationFile(dir)
		components, err := resolveComponents(dir, root, spec)
		if err != nil {
			return nil, &manifest.Error{Source: manifest.Source{File: filepath.Join(dir, file)}, Err: manifest.ErrKustomize,
				Msg: "applying the Application's kustomize components: " + err.Error()}
		}
		edit = func(data []byte) ([]byte, error) {
			out, err := editKustomization(data, file, spec, components)
			if err != nil {
				return nil, fmt.Errorf("applying the Application's kustomize options: %w", err)
			}
			return out, nil
		}
	}
	objs, err := manifest.BuildKustomization(ctx, dir, edit, mopts)
	return objs, unpredictable(err)
}

// isZero reports whether spec changes nothing, in which case Argo CD runs
// no edit at all.
func (s KustomizeSpec) isZero() bool {
	return s.NamePrefix == "" && s.NameSuffix == "" && s.Namespace == "" && len(s.Images) == 0 &&
		len(s.CommonLabels) == 0 && len(s.CommonAnnotations) == 0 && len(s.Replicas) == 0 &&
		len(s.Patches) == 0 && len(s.Components) == 0
}

// kustomizationFile returns the name of dir's kustomization file, the
// first kustomize recognises.
func kustomizationFile(dir string) string {
	for _, name := range kustomizationNames {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return name
		}
	}
	return kustomizationNames[0]
}

// resolveComponents returns the components Argo CD adds for spec.
//
// With IgnoreMissingComponents it keeps Argo CD v3.6's behaviour exactly:
// it looks for a kustomization in each component directory (inside the
// repository) and stops at the first component that has one, adding only
// that one; components listed after it are never added (the loop's
// labelled break leaves both loops).
//
// Without it, each entry is expanded like `kustomize edit add component`
// does: a glob pattern matched in dir, a literal path that must exist, or
// a remote URL kept as it is (the build then refuses it).
func resolveComponents(dir, root string, spec KustomizeSpec) ([]string, error) {
	if len(spec.Components) == 0 {
		return nil, nil
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if spec.IgnoreMissingComponents {
		r, err := os.OpenRoot(root)
		if err != nil {
			return nil, fmt.Errorf("failed to open the repo folder: %w", err)
		}
		defer r.Close()
		realDir, err := filepath.EvalSymlinks(absDir)
		if err != nil {
			return nil, err
		}
		for _, c := range spec.Components {
			componentDir, err := filepath.Rel(root, filepath.Join(realDir, c))
			if err != nil {
				return nil, fmt.Errorf("kustomize components path failed: %w", err)
			}
			for _, name := range kustomizationNames {
				if info, err := r.Stat(filepath.Join(componentDir, name)); err == nil && info.Mode().IsRegular() {
					return []string{c}, nil
				}
			}
		}
		return nil, nil
	}
	fsys := filesys.MakeFsOnDisk()
	var out []string
	for _, c := range spec.Components {
		p := filepath.Join(absDir, c)
		if !hasGlobMeta(c) {
			if _, err := os.Lstat(p); err == nil {
				out = append(out, c)
				continue
			}
		} else {
			matches, err := fsys.Glob(p)
			if err != nil {
				return nil, fmt.Errorf("error checking the filesystem: %w", err)
			}
			if len(matches) > 0 {
				for _, m := range matches {
					rel, err := filepath.Rel(absDir, m)
					if err != nil {
						return nil, err
					}
					out = append(out, rel)
				}
				continue
			}
		}
		if !isRemote(c) {
			return nil, fmt.Errorf("%s has no match: %w", c, fs.ErrNotExist)
		}
		out = append(out, c)
	}
	return out, nil
}

func hasGlobMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// isRemote reports whether kustomize would fetch the component rather than
// read it from disk; the build refuses such references with the reason.
func isRemote(s string) bool {
	lower := strings.ToLower(s)
	for _, prefix := range []string{"https://", "http://", "git::", "git@", "ssh://", "github.com/", "gitlab.com/", "bitbucket.org/"} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	return strings.Contains(lower, "://")
}

// unpredictable turns a refusal of a remote reference, which Argo CD would
// fetch, into render.Unpredictable, keeping the original errors.
func unpredictable(err error) error {
	if err == nil || !errors.Is(err, manifest.ErrRemoteReference) {
		return err
	}
	var me *manifest.Error
	subject, reason := "kustomization", err.Error()
	for _, e := range flatten(err) {
		if errors.Is(e, manifest.ErrRemoteReference) && errors.As(e, &me) {
			subject, reason = me.Source.String(), me.Msg
			break
		}
	}
	return errors.Join(&render.Unpredictable{Subject: subject, Reason: reason}, err)
}

// flatten returns the individual errors of an errors.Join tree.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
