package check

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/truce-dev/truce/manifest"
)

// Sources says where a check's Input was read from, so that a fix can be
// verified by loading the input again with the fix's files in place.
type Sources struct {
	// Repository and Cluster are the paths given (directories or files;
	// Git arguments in Repository are read, never fixed).
	Repository, Cluster []string
	// Live is true when Input.Cluster was read from a live cluster, which
	// fixes never change.
	Live bool
}

// git reports whether a repository argument is read from Git.
func (s Sources) git() bool {
	for _, a := range s.Repository {
		if _, ok := manifest.ParseGitArg(a); ok {
			return true
		}
	}
	return false
}

// NewLoader verifies a fix of in, read from src. Plain manifest files the
// fix rewrites or creates are decoded from the fix's bytes and replace
// what was loaded from them; everything else is reused as loaded. When a
// fix touches what kustomize renders (a kustomization, or a file one
// uses), the inputs are copied to a temporary directory, the fix's files
// written over the copy, and everything is loaded from there.
//
// The objects of the inputs it returns are shared with in and with the
// other inputs it returns: callers read them and never change them.
func NewLoader(src Sources, in Input) Loader {
	// Each candidate fix of a file decodes the whole file again, with
	// one document changed: the others are remembered.
	// The objects of the sections a fix leaves as they are are shared by
	// every candidate's input: nothing a check does changes an object it
	// is given (TestCandidatesLeaveObjects).
	memo := manifest.NewSharedMemo()
	return func(ctx context.Context, overlay map[string][]byte) (Input, error) {
		if src.git() {
			return Input{}, fmt.Errorf("fixes of a Git source are verified on a working tree: clone it and check the directory")
		}
		if len(overlay) == 0 && in.Repository != nil {
			return in, nil
		}
		if in, ok, err := replaceFiles(overlay, src, in, memo); ok || err != nil {
			return in, err
		}
		return LoadOver(ctx, src, overlay, in.Cluster)
	}
}

// replaceFiles is the fast way of NewLoader's loader: ok is false when a
// file of the overlay is rendered by kustomize.
func replaceFiles(overlay map[string][]byte, src Sources, in Input, memo *manifest.Memo) (Input, bool, error) {
	if in.Repository == nil {
		return Input{}, false, nil
	}
	changed := map[string]bool{}
	// abs asks for the working directory for a relative path: once per
	// file, not once per object.
	absOf := map[string]string{}
	absFile := func(p string) string {
		a, ok := absOf[p]
		if !ok {
			a = abs(p)
			absOf[p] = a
		}
		return a
	}
	for p := range overlay {
		base := filepath.Base(p)
		if base == "kustomization.yaml" || base == "kustomization.yml" || base == "Kustomization" {
			return Input{}, false, nil
		}
		changed[abs(p)] = true
	}
	for _, objs := range [][]manifest.Object{in.Repository, in.Cluster} {
		for _, o := range objs {
			if o.Source.Kustomization == "" {
				continue
			}
			if changed[absFile(o.Source.File)] {
				return Input{}, false, nil
			}
			kdir := filepath.Dir(abs(o.Source.Kustomization)) + string(filepath.Separator)
			for p := range changed {
				if strings.HasPrefix(p, kdir) {
					return Input{}, false, nil
				}
			}
		}
	}
	keep := func(objs []manifest.Object) []manifest.Object {
		var out []manifest.Object
		for _, o := range objs {
			if !changed[absFile(o.Source.File)] {
				out = append(out, o)
			}
		}
		return out
	}
	repo, cl := keep(in.Repository), in.Cluster
	kept := len(repo)
	if !src.Live {
		cl = keep(in.Cluster)
	}
	// The cluster's part is in's when no file of it changes.
	sameCluster := src.Live || len(cl) == len(in.Cluster)
	under := func(p string, roots []string) bool {
		for _, r := range roots {
			ra := abs(r)
			if p == ra || strings.HasPrefix(p, ra+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	paths := make([]string, 0, len(overlay))
	for p := range overlay {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		opts := manifest.DefaultOptions()
		opts.Memo = memo
		objs, err := manifest.Decode(p, bytes.NewReader(overlay[p]), opts)
		if err != nil {
			return Input{}, true, err
		}
		switch {
		case under(abs(p), src.Repository):
			repo = append(repo, objs...)
		case under(abs(p), src.Cluster) && !src.Live:
			cl = append(cl, objs...)
			sameCluster = false
		default:
			return Input{}, true, fmt.Errorf("%s is outside the paths checked", p)
		}
	}
	out := Input{Repository: repo, Cluster: cl}
	if sameCluster {
		out.Cluster = in.Cluster
		out.replaced = &replacement{base: in, files: changed, kept: kept}
	}
	return out, true, nil
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// LoadOver loads the input of src from a temporary copy of its paths with
// the overlay's files (path → content) written over it; an empty overlay
// loads the files as they are. With src.Live, live is the cluster's part.
func LoadOver(ctx context.Context, src Sources, overlay map[string][]byte, live []manifest.Object) (Input, error) {
	tmp, err := os.MkdirTemp("", "truce-verify-")
	if err != nil {
		return Input{}, err
	}
	defer os.RemoveAll(tmp)
	mapped := func(paths []string, prefix string) ([]string, map[string]string, error) {
		out := make([]string, len(paths))
		roots := map[string]string{}
		for i, p := range paths {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, nil, err
			}
			dst := filepath.Join(tmp, fmt.Sprintf("%s%d", prefix, i), filepath.Base(abs))
			if err := copyTree(abs, dst); err != nil {
				return nil, nil, fmt.Errorf("copying %s to verify a fix: %w", p, err)
			}
			out[i] = dst
			roots[abs] = dst
		}
		return out, roots, nil
	}
	repoPaths, repoRoots, err := mapped(src.Repository, "repo")
	if err != nil {
		return Input{}, err
	}
	cPaths, cRoots, err := mapped(src.Cluster, "cluster")
	if err != nil {
		return Input{}, err
	}
	for path, data := range overlay {
		dst, err := mapInto(path, repoRoots, cRoots)
		if err != nil {
			return Input{}, err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return Input{}, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return Input{}, err
		}
	}
	var repoObjs []manifest.Object
	for _, p := range repoPaths {
		got, err := manifest.LoadPaths(ctx, []string{p}, manifest.DefaultOptions())
		if err != nil {
			return Input{}, err
		}
		repoObjs = append(repoObjs, got...)
	}
	clusterObjs := live
	if !src.Live {
		if clusterObjs, err = manifest.LoadPaths(ctx, cPaths, manifest.DefaultOptions()); err != nil {
			return Input{}, err
		}
	}
	return Input{Repository: repoObjs, Cluster: clusterObjs}, nil
}

// mapInto finds where a file of the inputs lives in the copy.
func mapInto(path string, rootsList ...map[string]string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for _, roots := range rootsList {
		for src, dst := range roots {
			if abs == src {
				return dst, nil
			}
			if rel, err := filepath.Rel(src, abs); err == nil && !strings.HasPrefix(rel, "..") {
				return filepath.Join(dst, rel), nil
			}
		}
	}
	return "", fmt.Errorf("%s is outside the paths checked", path)
}

// copyTree copies regular files and directories (not .git, not symlinks
// leading out) from src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if d.Name() == ".git" && p != src {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		}
		return nil
	})
}
