package fix

import (
	"fmt"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/report"
)

// giveToController removes the loop's fields from Git, so that the
// controller writing them (an autoscaler's replicas, an injector's
// caBundle) owns them alone: what Argo CD and Flux document for such
// fields. The field is removed where Git's value comes from: the
// kustomize patch that sets it, else the manifest's own document. A
// chart's template is never edited.
func (e *editor) giveToController(p Problem) (*Candidate, error) {
	fields := p.loopFields()
	if p.Source.Renderer == manifest.RendererHelm {
		return nil, fmt.Errorf("%s is rendered by Helm from %s: take %s out of the chart's template (or behind a values key that leaves it out); truce does not edit templates",
			p.Object.Ref, p.Source.RenderRoot, strings.Join(fields, ", "))
	}
	if err := rendered(p.Source); err != nil {
		return nil, err
	}
	var where []string
	for _, ptr := range fields {
		name, err := e.removeField(p, ptr)
		if err != nil {
			return nil, err
		}
		where = append(where, ptr+" from "+name)
	}
	other := "the other writer"
	if p.Object.Loop != nil && p.Object.Loop.Other != "" {
		other = p.Object.Loop.Other
	}
	c := e.candidate("Give the field to its controller",
		fmt.Sprintf("Remove %s: %s then owns %s alone, and %s no longer writes Git's value back. A new object gets the API server's default until %s sets it.",
			strings.Join(where, "; "), other, strings.Join(fields, ", "), report.ToolTitle(p.Tool), other), "")
	c.FromLive, c.Fields = true, fields
	return c, nil
}

// removeField removes field ptr where Git's value comes from, and names
// the file: the last kustomize patch of the object that sets it, else the
// manifest's document.
func (e *editor) removeField(p Problem, ptr string) (string, error) {
	if p.Source.Kustomization != "" && p.Source.Kustomization != p.Source.File && p.Object.Drift != nil {
		if git, ok := valueAt(p.Object.Drift.Desired, ptr); ok {
			if k, err := e.file(p.Source.Kustomization); err == nil && k.Documents() == 1 {
				sites := e.patchSites(k, p.Source.Kustomization)
				var found *patchSite
				at := ""
				for i := range sites {
					if a, ok := patchPointer(&sites[i], p, ptr, git); ok {
						found, at = &sites[i], a
					}
				}
				if found != nil {
					if err := found.file.Remove(found.doc, at); err != nil {
						return "", fmt.Errorf("removing %s from %s: %w", at, found.name, err)
					}
					if found.save != nil {
						if err := found.save(); err != nil {
							return "", err
						}
					}
					return found.name, nil
				}
			}
		}
	}
	f, doc, err := e.doc(p.Source)
	if err != nil {
		return "", err
	}
	if _, ok, _ := f.Get(doc, ptr); !ok {
		return "", fmt.Errorf("%s does not set %s: Git's value comes from elsewhere", p.Source, ptr)
	}
	if err := f.Remove(doc, ptr); err != nil {
		return "", fmt.Errorf("removing %s from %s: %w", ptr, p.Source, err)
	}
	return p.Source.String(), nil
}
