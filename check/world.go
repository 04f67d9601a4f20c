package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/world"
	"github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

// WorldInput is the input of one world: its objects are the repository's,
// and the objects it holds before any unit applies join the cluster's.
func WorldInput(w *world.World, cluster []manifest.Object) Input {
	return Input{
		Repository: w.Objects,
		Cluster:    append(append([]manifest.Object(nil), cluster...), w.Base...),
		World:      w.Name,
		Units:      w.Units,
		Notes:      w.Notes,
	}
}

// WorldLoader verifies fixes of the index-th world read from paths: the
// repository root is copied to a temporary directory, the fix's files
// written over the copy, and the worlds read again from there, since a
// value in a chart's values or a kustomize patch reaches the objects only
// through rendering.
//
// The cluster's objects are read again from src.Cluster with the fix's
// files for them (a fix may replace a mutating binding given with -c),
// unless src.Live.
func WorldLoader(paths []string, index int, opts world.Options, src Sources, cluster []manifest.Object) Loader {
	return func(ctx context.Context, fixFiles map[string][]byte) (Input, error) {
		cl, overlay := cluster, map[string][]byte{}
		mine := map[string][]byte{}
		for p, data := range fixFiles {
			if _, err := mapInto(p, rootsOf(src.Cluster)); err == nil && !src.Live {
				mine[p] = data
			} else {
				overlay[p] = data
			}
		}
		if len(mine) > 0 {
			in, err := LoadOver(ctx, Sources{Cluster: src.Cluster}, mine, nil)
			if err != nil {
				return Input{}, err
			}
			cl = in.Cluster
		}
		root := opts.Root
		if root == "" {
			r, err := manifest.RepositoryRoot(paths[0])
			if err != nil {
				return Input{}, err
			}
			root = r
		}
		root = abs(root)
		tmp, err := os.MkdirTemp("", "truce-verify-")
		if err != nil {
			return Input{}, err
		}
		defer os.RemoveAll(tmp)
		if err := copyTree(root, tmp); err != nil {
			return Input{}, fmt.Errorf("copying %s to verify a fix: %w", root, err)
		}
		moved := func(p string) (string, error) {
			rel, err := filepath.Rel(root, abs(p))
			if err != nil || strings.HasPrefix(rel, "..") {
				return "", fmt.Errorf("%s is outside the repository %s", p, root)
			}
			return filepath.Join(tmp, rel), nil
		}
		for p, data := range overlay {
			dst, err := moved(p)
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
		mapped := make([]string, len(paths))
		for i, p := range paths {
			if mapped[i], err = moved(p); err != nil {
				return Input{}, err
			}
		}
		o := opts
		o.Root = tmp
		o.RepoURLs = append(append([]string(nil), opts.RepoURLs...), world.CheckoutURLs(root)...)
		worlds, err := world.Load(ctx, mapped, o)
		if err != nil {
			return Input{}, err
		}
		if index >= len(worlds) {
			return Input{}, fmt.Errorf("the fix changes the repository's entry points")
		}
		return WorldInput(worlds[index], cl), nil
	}
}

// rootsOf maps paths to themselves, as mapInto takes them.
func rootsOf(paths []string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		out[abs(p)] = abs(p)
	}
	return out
}

// unitRuns reports the units that could not be rendered: Unpredictable
// when truce cannot know what they hold, else the error the tool would
// show, which stops it from applying anything of the unit.
func unitRuns(in Input) []report.Run {
	var out []report.Run
	for _, u := range in.Units {
		if u.Problem == nil {
			continue
		}
		obj := report.Object{Object: u.Unit.String(), Source: u.Source.String(), Verdict: simulate.Rejected}
		if up, ok := render.AsUnpredictable(u.Problem); ok {
			obj.Verdict = simulate.Unpredictable
			obj.Reason = up.Error()
		} else {
			obj.Reason = fmt.Sprintf("%s cannot render it, so it applies nothing: %v", report.ToolTitle(u.Tool), u.Problem)
		}
		out = append(out, report.Run{World: in.World, Tool: u.Tool, Unit: unitLabel(u), Settings: "not rendered", Objects: []report.Object{obj}})
	}
	return out
}

// unrendered are the setups (tool, unit) of units that could not be
// rendered.
func unrendered(in Input) map[[2]string]bool {
	out := map[[2]string]bool{}
	for _, u := range in.Units {
		if u.Problem != nil {
			out[setupOf(u.Unit)] = true
		}
	}
	return out
}

// unitLabel is how runs name a unit: its name, with the kind for a
// HelmRelease (which may share a Kustomization's name), as
// simulate.Setups names them.
func unitLabel(u *world.Unit) string {
	switch u.Kind {
	case world.KindHelmRelease:
		return simulate.HelmReleaseUnit(u.Name)
	case world.KindApplicationSet:
		return "ApplicationSet " + u.Name
	}
	return u.Name
}
