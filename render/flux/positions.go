package flux

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/resource"

	"github.com/truce-dev/truce/manifest"
)

// locator maps built objects back to the files they were written in,
// using kustomize's origin annotations.
type locator struct {
	b      *builder
	parsed map[string][]manifest.Object
}

func newLocator(b *builder) *locator {
	return &locator{b: b, parsed: make(map[string][]manifest.Object)}
}

// source is where res was written: the resource file and line when
// kustomize recorded its origin, the kustomization file for generated
// objects, else the directory.
func (l *locator) source(res *resource.Resource) manifest.Source {
	kust := l.b.display(l.b.kfile)
	fallback := manifest.Source{File: l.b.display(l.b.dir), Kustomization: kust}
	origin, err := res.GetOrigin()
	if err != nil || origin == nil || origin.Repo != "" {
		return fallback
	}
	switch {
	case origin.Path != "":
		file := filepath.Join(l.b.dir, filepath.FromSlash(origin.Path))
		if !l.b.inside(file) {
			return fallback
		}
		return manifest.Source{File: l.b.display(file), Line: l.line(file, res), Kustomization: kust}
	case origin.ConfiguredIn != "":
		file := filepath.Join(l.b.dir, filepath.FromSlash(origin.ConfiguredIn))
		if !l.b.inside(file) {
			return fallback
		}
		return manifest.Source{File: l.b.display(file), Kustomization: kust}
	}
	return fallback
}

// line finds where the object that became res starts in file. kustomize
// records the file but not the document, and may have renamed the object
// (namePrefix, nameSuffix, targetNamespace), so the candidate is chosen by
// kind, name and namespace; 0 means no unambiguous match.
func (l *locator) line(file string, res *resource.Resource) int {
	objs, ok := l.parsed[file]
	if !ok {
		objs = l.parse(file)
		l.parsed[file] = objs
	}
	if len(objs) == 1 {
		return objs[0].Source.Line
	}
	kind, name, ns := res.GetKind(), res.GetName(), res.GetNamespace()
	best, bestScore, tie := 0, 0, false
	for _, o := range objs {
		on := o.Object.GetName()
		score := 0
		switch {
		case on == "":
			continue
		case on == name:
			score = 1 << 12
		case strings.Contains(name, on):
			score = len(on) << 2 // the longest original name that fits wins
		default:
			continue
		}
		if o.Object.GetKind() == kind {
			score += 1 << 20
		}
		if o.Object.GetNamespace() == ns {
			score++
		}
		switch {
		case score > bestScore:
			best, bestScore, tie = o.Source.Line, score, false
		case score == bestScore:
			tie = true
		}
	}
	if tie {
		return 0
	}
	return best
}

// parse decodes file plainly, as it is written; problems only cost the
// line numbers.
func (l *locator) parse(file string) []manifest.Object {
	info, err := os.Stat(file)
	if err != nil || !info.Mode().IsRegular() || info.Size() > l.b.lim.maxFile {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	objs, _ := manifest.Decode(file, bytes.NewReader(data), l.b.opts.Render.Manifest)
	return objs
}
