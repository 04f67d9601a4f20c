package fix

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/truce-dev/truce/fix/yamledit"
)

// patchSite is one patch document of a kustomization: where it is, and
// how to write it back.
type patchSite struct {
	name string
	file *yamledit.File
	doc  int
	// target is the patch entry's target, nil for none.
	target map[string]any
	// save writes an inline patch back into the kustomization; nil for a
	// patch file, which the editor collects itself.
	save func() error
}

// kustomizeExistingPatch edits the patch of the kustomization rendering
// the object that sets the fields (patches, by path or inline, strategic
// merge or JSON 6902, and patchesStrategicMerge): the value in Git comes
// from it, and the base may be shared or another repository's. It returns
// nil when the patches do not set every field to its Git value.
func (e *editor) kustomizeExistingPatch(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	if p.Object.Drift == nil {
		return nil, nil
	}
	kpath := p.Source.Kustomization
	k, err := e.file(kpath)
	if err != nil || k.Documents() != 1 {
		return nil, nil
	}
	sites := e.patchSites(k, kpath)
	desired := map[string]any{}
	for _, fd := range p.Object.Drift.Fields {
		if !fd.DesiredAbsent {
			desired[fd.Pointer] = fd.Desired
		}
	}
	type edit struct {
		site *patchSite
		ptr  string
	}
	var edits []edit
	var where []string
	for _, ptr := range fields {
		git, ok := desired[ptr]
		if !ok {
			return nil, nil
		}
		var found *edit
		for i := range sites {
			if at, ok := patchPointer(&sites[i], p, ptr, git); ok {
				found = &edit{&sites[i], at}
			}
		}
		if found == nil {
			return nil, nil
		}
		edits = append(edits, *found)
	}
	for i, ed := range edits {
		if err := ed.site.file.Set(ed.site.doc, ed.ptr, values[fields[i]]); err != nil {
			return nil, fmt.Errorf("setting %s in %s: %w", ed.ptr, ed.site.name, err)
		}
		where = append(where, fmt.Sprintf("%s = %s in %s", fields[i], show(values[fields[i]]), ed.site.name))
	}
	for i := range sites {
		if sites[i].save != nil && sites[i].file.Changed() {
			if err := sites[i].save(); err != nil {
				return nil, err
			}
		}
	}
	return e.candidate("Put the mutation in Git (kustomize patch)",
		fmt.Sprintf("Set %s: the patch Git's value comes from then sets the value admission stores, admission has nothing to change, and a diff shows real drift only.",
			strings.Join(where, "; ")), ""), nil
}

// patchSites lists the patch documents of a kustomization, in its order
// (later patches win, so the last site setting a field is the one kept).
func (e *editor) patchSites(k *yamledit.File, kpath string) []patchSite {
	dir := filepath.Dir(kpath)
	var sites []patchSite
	fromFile := func(rel string, target map[string]any) {
		if filepath.IsAbs(rel) || strings.Contains(rel, "://") {
			return
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		f, err := e.file(path)
		if err != nil {
			return
		}
		for d := 0; d < f.Documents(); d++ {
			sites = append(sites, patchSite{name: path, file: f, doc: d, target: target})
		}
	}
	inline := func(ptr, text string, target map[string]any) {
		f, err := yamledit.Parse(kpath+" "+ptr, []byte(text))
		if err != nil || f.Documents() != 1 {
			return
		}
		sites = append(sites, patchSite{name: kpath + " (" + ptr[1:] + ")", file: f, target: target,
			save: func() error { return k.Set(0, ptr, string(f.Bytes())) }})
	}
	if v, ok, _ := k.Get(0, "/patchesStrategicMerge"); ok {
		list, _ := v.([]any)
		for i, it := range list {
			s, _ := it.(string)
			if strings.Contains(s, "\n") {
				inline(fmt.Sprintf("/patchesStrategicMerge/%d", i), s, nil)
			} else if s != "" {
				fromFile(s, nil)
			}
		}
	}
	for _, key := range []string{"patches", "patchesJson6902"} {
		v, ok, _ := k.Get(0, "/"+key)
		if !ok {
			continue
		}
		list, _ := v.([]any)
		for i, it := range list {
			m, _ := it.(map[string]any)
			target, _ := m["target"].(map[string]any)
			if path, _ := m["path"].(string); path != "" {
				fromFile(path, target)
			} else if text, _ := m["patch"].(string); text != "" {
				inline(fmt.Sprintf("/%s/%d/patch", key, i), text, target)
			}
		}
	}
	return sites
}

// patchPointer is where a patch document sets field ptr of the problem's
// object to its Git value, if it does: a JSON 6902 add or replace of ptr,
// or the field of a strategic merge patch of the object, list items
// matched by name.
func patchPointer(s *patchSite, p Problem, ptr string, git any) (string, bool) {
	ref := p.Object.Ref
	if s.target != nil {
		if k, _ := s.target["kind"].(string); k != "" && k != ref.Kind {
			return "", false
		}
		if n, _ := s.target["name"].(string); n != "" && n != ref.Name {
			return "", false
		}
	}
	root, ok, _ := s.file.Get(s.doc, "")
	if !ok {
		return "", false
	}
	switch r := root.(type) {
	case []any:
		if s.target == nil {
			return "", false
		}
		for i, it := range r {
			op, _ := it.(map[string]any)
			if (op["op"] == "replace" || op["op"] == "add") && op["path"] == ptr && equalScalar(op["value"], git) {
				return fmt.Sprintf("/%d/value", i), true
			}
		}
	case map[string]any:
		if k, _ := r["kind"].(string); k != ref.Kind {
			return "", false
		}
		if s.target == nil {
			md, _ := r["metadata"].(map[string]any)
			if n, _ := md["name"].(string); n != ref.Name {
				return "", false
			}
		}
		at, ok := smpPointer(p.Object.Drift.Desired, r, ptr)
		if !ok {
			return "", false
		}
		if v, ok := valueAt(r, at); ok && equalScalar(v, git) {
			return at, true
		}
	}
	return "", false
}

// smpPointer translates a pointer into the object into one into a
// strategic merge patch of it: list items are matched by their name (the
// merge key of containers, env, ports and volumes), else by position
// when the patch holds the whole list.
func smpPointer(obj, patch map[string]any, ptr string) (string, bool) {
	if !strings.HasPrefix(ptr, "/") {
		return "", false
	}
	var o, pt any = obj, patch
	var out []string
	for _, tok := range strings.Split(ptr[1:], "/") {
		switch ov := o.(type) {
		case map[string]any:
			pm, ok := pt.(map[string]any)
			if !ok {
				return "", false
			}
			key := strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			o, pt = ov[key], pm[key]
			out = append(out, tok)
		case []any:
			pl, ok := pt.([]any)
			i, err := strconv.Atoi(tok)
			if !ok || err != nil || i < 0 || i >= len(ov) {
				return "", false
			}
			j := -1
			if item, _ := ov[i].(map[string]any); item != nil && item["name"] != nil {
				for n, it := range pl {
					if m, _ := it.(map[string]any); m != nil && m["name"] == item["name"] {
						j = n
					}
				}
			} else if len(pl) == len(ov) {
				j = i
			}
			if j < 0 {
				return "", false
			}
			o, pt = ov[i], pl[j]
			out = append(out, strconv.Itoa(j))
		default:
			return "", false
		}
	}
	return "/" + strings.Join(out, "/"), true
}
