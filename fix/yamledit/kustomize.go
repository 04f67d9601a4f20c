package yamledit

import (
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// AddKustomizePatch adds "- path: <patchPath>" under "patches:" in a
// kustomization, with patchPath made relative to the kustomization's
// directory, creating the "patches" key if needed and keeping the rest of
// the file as it is. A kustomization that already lists the patch (under
// patches or patchesStrategicMerge) is returned unchanged.
//
// kustomizationPath and patchPath are file paths, both relative to the same
// directory or both absolute; kustomization is the file's content.
func AddKustomizePatch(kustomizationPath string, kustomization []byte, patchPath string) ([]byte, error) {
	rel, err := relativePatchPath(kustomizationPath, patchPath)
	if err != nil {
		return nil, err
	}
	f, err := Parse(kustomizationPath, kustomization)
	if err != nil {
		return nil, err
	}
	entry := map[string]any{"path": rel}
	switch f.Documents() {
	case 0:
		// Only comments: add the key at the end.
		out := append([]byte(nil), kustomization...)
		eol := "\n"
		if strings.Contains(string(out), "\r\n") {
			eol = "\r\n"
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, eol...)
		}
		return append(out, "patches:"+eol+"- path: "+plainOrQuoted(rel)+eol...), nil
	case 1:
	default:
		return nil, &Error{File: kustomizationPath, Kind: ErrInvalid, Msg: "a kustomization must be a single YAML document"}
	}
	listed := func(ptr string, match func(any) bool) (bool, error) {
		v, ok, err := f.Get(0, ptr)
		if err != nil || !ok {
			return false, err
		}
		items, isList := v.([]any)
		if !isList {
			if v == nil {
				return false, nil
			}
			return false, &Error{File: kustomizationPath, Kind: ErrInvalid, Msg: ptr[1:] + " is not a list"}
		}
		for _, it := range items {
			if match(it) {
				return true, nil
			}
		}
		return false, nil
	}
	samePath := func(p any) bool {
		s, ok := p.(string)
		return ok && path.Clean(s) == rel
	}
	if ok, err := listed("/patches", func(it any) bool {
		m, _ := it.(map[string]any)
		return m != nil && samePath(m["path"])
	}); err != nil || ok {
		return kustomization, err
	}
	if ok, err := listed("/patchesStrategicMerge", samePath); err != nil || ok {
		return kustomization, err
	}
	if err := f.Set(0, "/patches/-", entry); err != nil {
		return nil, err
	}
	return f.Bytes(), nil
}

func plainOrQuoted(s string) string {
	if plainOK(s, false, false) {
		return s
	}
	return doubleQuote(s)
}

// relativePatchPath returns patchPath relative to the kustomization's
// directory, with forward slashes.
func relativePatchPath(kustomizationPath, patchPath string) (string, error) {
	dir := filepath.Dir(kustomizationPath)
	if filepath.IsAbs(dir) != filepath.IsAbs(patchPath) {
		var err error
		if dir, err = filepath.Abs(dir); err != nil {
			return "", err
		}
		if patchPath, err = filepath.Abs(patchPath); err != nil {
			return "", err
		}
	}
	rel, err := filepath.Rel(dir, patchPath)
	if err != nil {
		return "", err
	}
	rel = filepath.ToSlash(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", &Error{File: kustomizationPath, Kind: ErrInvalid, Msg: fmt.Sprintf(
			"patch %s is outside the kustomization's directory; kustomize's default load restrictor refuses such files", patchPath)}
	}
	return rel, nil
}

// builtinGroups are the API groups served by kube-apiserver itself, whose
// types have strategic merge patch metadata. Custom resources do not:
// kustomize replaces their lists as a whole.
var builtinGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"networking.k8s.io": true, "rbac.authorization.k8s.io": true, "storage.k8s.io": true,
	"scheduling.k8s.io": true, "coordination.k8s.io": true, "node.k8s.io": true,
	"discovery.k8s.io": true, "admissionregistration.k8s.io": true, "apiextensions.k8s.io": true,
	"certificates.k8s.io": true, "flowcontrol.apiserver.k8s.io": true, "resource.k8s.io": true,
	"apiregistration.k8s.io": true, "events.k8s.io": true, "storagemigration.k8s.io": true,
	"internal.apiserver.k8s.io": true, "authentication.k8s.io": true, "authorization.k8s.io": true,
}

// mergeKey returns the strategic merge key of the list field at path (the
// tokens from the object root, list indexes included) of a built-in kind,
// or "" for a list that is replaced as a whole.
func mergeKey(kind string, path []string) string {
	if len(path) == 0 {
		return ""
	}
	switch field := path[len(path)-1]; field {
	case "containers", "initContainers", "ephemeralContainers", "env", "volumes",
		"imagePullSecrets", "resourceClaims", "schedulingGates":
		return "name"
	case "volumeMounts":
		return "mountPath"
	case "volumeDevices":
		return "devicePath"
	case "hostAliases":
		return "ip"
	case "topologySpreadConstraints":
		return "topologyKey"
	case "ownerReferences":
		return "uid"
	case "ports":
		if kind == "Service" && len(path) == 2 && path[0] == "spec" {
			return "port"
		}
		if len(path) >= 3 && strings.HasSuffix(path[len(path)-3], "ontainers") {
			return "containerPort"
		}
	}
	return ""
}

// StrategicPatch builds a minimal strategic merge patch, as a YAML document
// for kustomize's "patches", that sets the fields given as JSON pointer →
// value on the object apiVersion/kind namespace/name. A nil value deletes
// the field.
//
// List indexes in pointers are resolved against original, the object the
// pointers address: for the lists of built-in kinds that Kubernetes merges
// by a key (containers and env by name, container ports by containerPort,
// volumeMounts by mountPath, ...), the patch holds one entry per addressed
// item with its merge key; any other list (those of custom resources,
// args, tolerations) is written whole, with the changes applied, because
// kustomize replaces it as a whole. original may be nil when no pointer
// goes through a list.
func StrategicPatch(apiVersion, kind, name, namespace string, fields map[string]any, original map[string]any) ([]byte, error) {
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, &Error{File: kind + "/" + name, Kind: ErrInvalid, Msg: fmt.Sprintf(format, args...)}
	}
	if apiVersion == "" || kind == "" || name == "" {
		return fail("apiVersion, kind and name are required")
	}
	group := ""
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	builtin := builtinGroups[group]
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	patch := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	orig, err := normalizeValue(original, 0)
	if err != nil {
		return fail("original object: %v", err)
	}
	type field struct {
		ptr  string
		toks []string
	}
	var list []field
	for p := range fields {
		toks, err := parsePointer(p)
		if err != nil {
			return fail("%v", err)
		}
		list = append(list, field{p, toks})
	}
	// List entries come out in the original's order, new ones last.
	sort.Slice(list, func(i, j int) bool { return lessTokens(list[i].toks, list[j].toks) })
	for _, fl := range list {
		p, toks := fl.ptr, fl.toks
		if len(toks) == 0 {
			return fail("cannot patch the whole object")
		}
		switch toks[0] {
		case "apiVersion", "kind":
			return fail("%s cannot be patched", p)
		case "metadata":
			if len(toks) == 1 || toks[1] == "name" || toks[1] == "namespace" {
				return fail("%s identifies the object and cannot be patched", p)
			}
		}
		v, err := normalizeValue(fields[p], 0)
		if err != nil {
			return fail("%s: %v", p, err)
		}
		sp := smpBuilder{kind: kind, builtin: builtin}
		if err := sp.add(patch, orig, nil, toks, v); err != nil {
			return fail("%s: %v", p, err)
		}
	}
	r := renderer{step: 2, seqIndent: 2, gap: 2, eol: "\n", first: func(path []string) []string {
		return patchKeyOrder(kind, path)
	}}
	out := r.block(patch, 0, nil, entryStyle{}) + "\n"
	got, err := kubectlView([]byte(out))
	if err != nil || !equalData(got, patch) {
		return fail("internal error: the patch does not decode to itself")
	}
	return []byte(out), nil
}

// lessTokens orders pointers token by token, list indexes numerically and
// "-" after them.
func lessTokens(a, b []string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		rank := func(t string) int {
			switch {
			case t == "-":
				return 1 << 30
			case arrayIndex(t) >= 0:
				return arrayIndex(t)
			}
			return -1
		}
		ra, rb := rank(a[i]), rank(b[i])
		if ra >= 0 && rb >= 0 {
			return ra < rb
		}
		return a[i] < b[i]
	}
	return len(a) < len(b)
}

// patchKeyOrder puts the identifying keys first.
func patchKeyOrder(kind string, path []string) []string {
	switch {
	case len(path) == 0:
		return []string{"apiVersion", "kind", "metadata"}
	case len(path) == 1 && path[0] == "metadata":
		return []string{"name", "namespace"}
	case path[len(path)-1] == "-":
		if k := mergeKey(kind, path[:len(path)-1]); k != "" {
			return []string{k}
		}
		return []string{"name"}
	}
	return nil
}

type smpBuilder struct {
	kind    string
	builtin bool
}

// add sets toks (relative to path) to v in the patch map m, where orig is
// the original value at path.
func (b smpBuilder) add(m map[string]any, orig any, path, toks []string, v any) error {
	tok := toks[0]
	origMap, _ := orig.(map[string]any)
	origChild := origMap[tok]
	path = subToks(path, tok)
	if len(toks) == 1 {
		m[tok] = v
		return nil
	}
	next := toks[1]
	if origList, isList := origChild.([]any); isList || next == "-" || arrayIndex(next) >= 0 && origChild == nil {
		key := ""
		if b.builtin {
			key = mergeKey(b.kind, path)
		}
		if key == "" || !mergeable(origList, key) {
			// Replaced as a whole: write the whole list.
			if origChild == nil && next != "-" {
				return fmt.Errorf("list index %q needs the original object", next)
			}
			cur, ok := m[tok].([]any)
			if !ok {
				c, err := normalizeValue(origList, 0) // a copy
				if err != nil {
					return err
				}
				cur, _ = c.([]any)
			}
			n, err := dataSet(cur, toks[1:], v)
			if err != nil {
				return err
			}
			m[tok] = n
			return nil
		}
		return b.addMerged(m, tok, origList, key, path, toks[1:], v)
	}
	child, ok := m[tok].(map[string]any)
	if !ok {
		if _, exists := m[tok]; exists {
			return fmt.Errorf("conflicts with another field of the patch")
		}
		child = map[string]any{}
		m[tok] = child
	}
	return b.add(child, origChild, path, toks[1:], v)
}

// mergeable reports whether every item of a list is a map with the merge
// key.
func mergeable(list []any, key string) bool {
	for _, it := range list {
		m, ok := it.(map[string]any)
		if !ok || m[key] == nil {
			return false
		}
	}
	return true
}

// addMerged handles toks (starting with an index or "-") into a list merged
// by key.
func (b smpBuilder) addMerged(m map[string]any, field string, origList []any, key string, path, toks []string, v any) error {
	// Every original item gets an entry, in the original order: kustomize
	// puts the patch's entries first, so a partial list would reorder the
	// items, and order matters (init containers, env references).
	entries, _ := m[field].([]any)
	if len(entries) == 0 {
		for _, it := range origList {
			entries = append(entries, map[string]any{key: it.(map[string]any)[key]})
		}
	}
	if toks[0] == "-" {
		nv := build(toks[1:], v)
		e, ok := nv.(map[string]any)
		if !ok || e[key] == nil {
			return fmt.Errorf("a new %s entry must have %q", field, key)
		}
		m[field] = append(entries, e)
		return nil
	}
	m[field] = entries
	i := arrayIndex(toks[0])
	if i < 0 || i >= len(origList) {
		return fmt.Errorf("list index %q out of range in the original object", toks[0])
	}
	item := origList[i].(map[string]any)
	kv := item[key]
	var entry map[string]any
	for _, e := range entries {
		if em, ok := e.(map[string]any); ok && equalData(em[key], kv) {
			entry = em
			break
		}
	}
	if entry == nil {
		return fmt.Errorf("no %s entry with %s %v", field, key, kv)
	}
	if len(toks) == 1 {
		// The whole item: its fields, and null for those it drops.
		nm, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("a %s entry must be a map", field)
		}
		if nm[key] != nil && !equalData(nm[key], kv) {
			return fmt.Errorf("cannot change the merge key %q of a %s entry with a strategic merge patch", key, field)
		}
		for k := range item {
			if _, ok := nm[k]; !ok && k != key {
				entry[k] = nil
			}
		}
		for k, x := range nm {
			entry[k] = x
		}
		return nil
	}
	if toks[1] == key {
		return fmt.Errorf("cannot change the merge key %q of a %s entry with a strategic merge patch", key, field)
	}
	return b.add(entry, item, subToks(path, toks[0]), toks[1:], v)
}
