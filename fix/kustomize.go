package fix

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/pkg/util"
)

// containerImage matches the pointer of a container's image.
var containerImage = regexp.MustCompile(`/(initContainers|containers|ephemeralContainers)/[0-9]+/image$`)

// kustomizeImages writes the stored images into the images entries of
// the kustomization that rendered the object, when each field is a
// container image one of its entries sets: the entry, not the base
// (which may be shared, or another repository's), is where the value
// comes from. It returns nil when the entries do not cover every field.
func (e *editor) kustomizeImages(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	kpath := p.Source.Kustomization
	desired := map[string]any{}
	if p.Object.Drift != nil {
		for _, fd := range p.Object.Drift.Fields {
			if !fd.DesiredAbsent {
				desired[fd.Pointer] = fd.Desired
			}
		}
	}
	for _, ptr := range fields {
		if !containerImage.MatchString(ptr) {
			return nil, nil
		}
	}
	f, err := e.file(kpath)
	if err != nil || f.Documents() != 1 {
		return nil, nil
	}
	v, ok, _ := f.Get(0, "/images")
	entries, _ := v.([]any)
	if !ok || len(entries) == 0 {
		return nil, nil
	}
	// First find an entry for every field, then edit: a field no entry
	// sets leaves the kustomization as it was.
	type edit struct {
		entry      int
		key, value string
	}
	var edits []edit
	for _, ptr := range fields {
		git, _ := desired[ptr].(string)
		stored, _ := values[ptr].(string)
		if git == "" || stored == "" {
			return nil, nil
		}
		gName, gTag, gDigest := util.SplitImageName(git)
		sName, sTag, sDigest := util.SplitImageName(stored)
		i := imageEntry(entries, gName, gTag, gDigest)
		if i < 0 {
			return nil, nil
		}
		for _, c := range [][3]string{{"newName", gName, sName}, {"newTag", gTag, sTag}, {"digest", gDigest, sDigest}} {
			if c[1] == c[2] {
				continue
			}
			if c[2] == "" {
				return nil, fmt.Errorf("admission removes the %s of %s; an images entry cannot", c[0], git)
			}
			edits = append(edits, edit{i, c[0], c[2]})
		}
	}
	var lines []string
	seen := map[edit]bool{}
	for _, ed := range edits {
		if seen[ed] {
			continue
		}
		seen[ed] = true
		ptr := fmt.Sprintf("/images/%d/%s", ed.entry, ed.key)
		if err := f.Set(0, ptr, ed.value); err != nil {
			return nil, fmt.Errorf("setting %s in %s: %w", ptr, kpath, err)
		}
		name, _ := entries[ed.entry].(map[string]any)["name"].(string)
		lines = append(lines, fmt.Sprintf("images[%s].%s = %s", name, ed.key, ed.value))
	}
	return e.candidate("Put the mutation in Git (kustomize images)",
		fmt.Sprintf("Set %s in %s: the images transformer then writes the image admission stores, admission has nothing to change, and a diff shows real drift only.",
			strings.Join(lines, ", "), kpath), ""), nil
}

// imageEntry is the index of the images entry that produced an image of
// name, tag and digest: the one whose newName (else name) is the name and
// whose newTag and digest, where set, are the tag and digest.
func imageEntry(entries []any, name, tag, digest string) int {
	for i, it := range entries {
		m, _ := it.(map[string]any)
		if m == nil {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out := str("newName")
		if out == "" {
			out = str("name")
		}
		if out != name || str("newTag") != "" && str("newTag") != tag || str("digest") != "" && str("digest") != digest {
			continue
		}
		return i
	}
	return -1
}
