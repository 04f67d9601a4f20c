package flux

import (
	"bytes"
	"os"
	"path/filepath"

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

// line finds where the object that became res starts in file (see
// manifest.OriginLine); 0 means no unambiguous match.
func (l *locator) line(file string, res *resource.Resource) int {
	objs, ok := l.parsed[file]
	if !ok {
		objs = l.parse(file)
		l.parsed[file] = objs
	}
	return manifest.OriginLine(objs, res.GetKind(), res.GetName(), res.GetNamespace())
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
