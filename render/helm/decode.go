package helm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/truce-dev/truce/manifest"
)

// part is one "# Source:" section of Helm's output: one template's
// document, a hook, or a crds/ file.
type part struct {
	helmPath string // as Helm prints it: chart/templates/x.yaml
	kind     partKind
	text     string // "---\n# Source: ...\n" and the content, ending in "\n"
}

type partKind int

const (
	partObject   partKind = iota // the release manifest
	partCRD                      // a crds/ file printed in the release manifest
	partHook                     // a hook
	partCRDExtra                 // a crds/ file not in the release manifest
)

// decodeRelease decodes what helm template would print for rel (its
// manifest, then its hooks) plus the crds/ files, in one manifest.Decode
// call so that opts bound the whole render, and attributes every object
// to its template.
func decodeRelease(ch *Chart, r *templated, rel Release, opts manifest.Options) (*Rendered, error) {
	crdFiles := map[string]bool{}
	for _, crd := range r.Chart.CRDObjects() {
		crdFiles[crd.Filename] = true
	}
	parts := splitManifest(r.Manifest, crdFiles)
	for _, h := range r.Hooks {
		if rel.SkipTests && isTestHook(h) {
			continue
		}
		parts = append(parts, newPart(h.Path, partHook, h.Manifest))
	}
	if !rel.IncludeCRDs {
		for _, crd := range r.Chart.CRDObjects() {
			parts = append(parts, newPart(crd.Filename, partCRDExtra, string(crd.File.Data)))
		}
	}

	limit := opts.MaxFileBytes
	if limit <= 0 {
		limit = manifest.DefaultMaxFileBytes
	}
	size := 0
	for _, p := range parts {
		size += len(p.text)
	}
	if int64(size) > limit {
		return nil, fmt.Errorf("rendering %s: output is larger than the %s limit (MaxFileBytes)", ch, formatBytes(limit))
	}
	var stream strings.Builder
	stream.Grow(size)
	starts := make([]int, len(parts)) // the line each part starts on
	line := 1
	for i, p := range parts {
		starts[i] = line
		stream.WriteString(p.text)
		line += strings.Count(p.text, "\n")
	}

	objs, err := manifest.Decode(ch.Dir, strings.NewReader(stream.String()), opts)
	m := newSourceMapper(ch.Dir, ch.Chart)
	partOf := func(line int) int { return sort.SearchInts(starts, line+1) - 1 }
	source := func(i int) manifest.Source {
		file := ch.Dir
		if i >= 0 {
			file = m.file(parts[i].helmPath)
		}
		return manifest.Source{File: file, Renderer: manifest.RendererHelm, RenderRoot: ch.Dir}
	}

	out := &Rendered{}
	for _, o := range objs {
		i := partOf(o.Source.Line)
		o.Source = source(i)
		switch parts[max(i, 0)].kind {
		case partObject:
			out.Objects = append(out.Objects, o)
		case partCRD:
			out.Objects = append(out.Objects, o)
			out.CRDs = append(out.CRDs, o)
		case partHook:
			out.Hooks = append(out.Hooks, o)
		case partCRDExtra:
			out.CRDs = append(out.CRDs, o)
		}
	}
	// Decode's errors are fresh: they are re-pointed in place.
	manifest.EachError(err, func(e *manifest.Error) {
		if e.Source.Line > 0 {
			i := partOf(e.Source.Line)
			if i >= 0 {
				e.Msg = fmt.Sprintf("%s (line %d of its rendered output)", e.Msg, e.Source.Line-starts[i]-1)
			}
			e.Source = source(i)
		} else {
			e.Source = source(-1)
		}
	})
	return out, err
}

func newPart(helmPath string, kind partKind, content string) part {
	return part{helmPath: helmPath, kind: kind, text: "---\n# Source: " + helmPath + "\n" + content + "\n"}
}

// splitManifest splits a release manifest at Helm's "---\n# Source: NAME"
// headers. A crds/ file may hold several documents; they stay in its part.
func splitManifest(s string, crdFiles map[string]bool) []part {
	var parts []part
	start := 0 // where the current part starts in s
	for off := 0; off < len(s); {
		end := strings.IndexByte(s[off:], '\n')
		if end < 0 {
			break
		}
		next := off + end + 1
		if strings.TrimRight(s[off:next], "\r\n") == "---" && strings.HasPrefix(s[next:], "# Source: ") {
			if off > 0 || len(parts) > 0 {
				parts = closePart(parts, s[start:off])
			}
			nameEnd := strings.IndexByte(s[next:], '\n')
			if nameEnd < 0 {
				nameEnd = len(s) - next
			}
			name := strings.TrimSpace(strings.TrimPrefix(s[next:next+nameEnd], "# Source: "))
			kind := partObject
			if crdFiles[name] {
				kind = partCRD
			}
			parts = append(parts, part{helmPath: name, kind: kind})
			start = off
		}
		off = next
	}
	return closePart(parts, s[start:])
}

// closePart gives the last part (or a nameless first one) its text.
func closePart(parts []part, text string) []part {
	if text == "" {
		return parts
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if len(parts) == 0 || parts[len(parts)-1].text != "" {
		parts = append(parts, part{})
	}
	parts[len(parts)-1].text = text
	return parts
}
