package check

import (
	"context"
	"fmt"

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
// fix's files are written over ws's copy of the repository root, and the
// worlds read again from there, since a value in a chart's values or a
// kustomize patch reaches the objects only through rendering.
//
// The cluster's objects are read again from src.Cluster with the fix's
// files for them (a fix may replace a mutating binding given with -c),
// unless src.Live.
func WorldLoader(ws *Workspace, paths []string, index int, opts world.Options, src Sources, cluster []manifest.Object) Loader {
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
		var in Input
		err := ws.with(root, overlay, func(dir string, moved func(string) (string, error)) error {
			mapped := make([]string, len(paths))
			for i, p := range paths {
				var err error
				if mapped[i], err = moved(p); err != nil {
					return err
				}
			}
			o := opts
			o.Root = dir
			o.RepoURLs = append(append([]string(nil), opts.RepoURLs...), world.CheckoutURLs(root)...)
			worlds, err := world.Load(ctx, mapped, o)
			if err != nil {
				return err
			}
			if index >= len(worlds) {
				return fmt.Errorf("the fix changes the repository's entry points")
			}
			in = WorldInput(worlds[index], cl)
			return nil
		})
		return in, err
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
