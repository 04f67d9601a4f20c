package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

var (
	// ErrKustomize classifies an *Error reporting that kustomize could not
	// build a kustomization.
	ErrKustomize = errors.New("kustomize build failed")
	// ErrRemoteReference classifies an *Error about a kustomization that
	// refers to a remote base, component or file (a Git repository or an
	// http(s) URL), or to a Helm chart. truce renders offline and refuses
	// them instead of letting kustomize reach the network or run git or
	// helm.
	ErrRemoteReference = errors.New("remote reference")
)

// kustomizeMu serialises builds: krusty keeps the OpenAPI schema in
// package-level state that is not safe for concurrent builds (Flux's
// kustomize-controller serialises them for the same reason).
var kustomizeMu sync.Mutex

const (
	originAnnotation    = "config.kubernetes.io/origin"
	internalAnnotations = "internal.config.kubernetes.io/"
)

// renderKustomization builds the kustomization file kfile in dir of t and
// appends the resulting objects. Every object's Source points at the
// resource file and line it came from when kustomize's origin tracking and
// the file's contents allow, else at the kustomization file; in both cases
// Source.Kustomization names kfile.
func (l *loader) renderKustomization(t *tree, dir, kfile string) {
	name := t.display(kfile)
	key := "kustomize:" + t.key(dir)
	if l.seen[key] {
		return
	}
	l.seen[key] = true

	k := &kustFS{t: t, l: l, name: name, budget: l.opts.MaxTotalBytes, files: make(map[string][]byte), edit: l.edit}
	if r, err := resolveIn(t.fsys, kfile); err == nil {
		k.top = r
	}
	resources, err := k.build(name, dir)
	if err != nil {
		l.fail(err)
		return
	}

	// Serialise all objects into one stream so that the usual limits and
	// the kubectl-compatible decoder apply to exactly what kustomize-
	// controller or Argo CD would apply; starts[i] is the stream line
	// where resource i begins.
	var stream bytes.Buffer
	starts := make([]int, 0, len(resources))
	sources := make([]Source, 0, len(resources))
	line := 1
	for _, r := range resources {
		src := k.sourceOf(r, dir, name)
		if err := stripBuildAnnotations(r, k.injected); err != nil {
			l.fail(newError(src, ErrKustomize, "cannot remove kustomize's build annotations: "+err.Error()))
			continue
		}
		y, err := r.AsYAML()
		if err != nil {
			l.fail(newError(src, ErrKustomize, "cannot serialise kustomize output: "+err.Error()))
			continue
		}
		stream.WriteString("---\n")
		line++
		starts = append(starts, line)
		sources = append(sources, src)
		stream.Write(y)
		line += bytes.Count(y, []byte("\n"))
		if int64(stream.Len()) > l.opts.MaxFileBytes {
			break
		}
	}
	size := int64(stream.Len())
	if size > l.opts.MaxFileBytes {
		l.fail(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"kustomize output is larger than the %s limit ("+l.opts.LimitHint("MaxFileBytes")+"); not loading any of it",
			formatBytes(l.opts.MaxFileBytes))))
		return
	}
	if l.bytesRead+size > l.opts.MaxTotalBytes {
		l.stop(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"total input exceeds the %s limit ("+l.opts.LimitHint("MaxTotalBytes")+") with this kustomization's output",
			formatBytes(l.opts.MaxTotalBytes))))
		return
	}
	l.bytesRead += size

	objs, errs := len(l.objs), len(l.errs)
	l.decodeYAMLStream(name, stream.Bytes(), 1)
	at := func(line int) Source {
		i := sort.SearchInts(starts, line+1) - 1
		if i < 0 {
			return Source{File: name, Kustomization: name}
		}
		return sources[i]
	}
	for i := objs; i < len(l.objs); i++ {
		l.objs[i].Source = at(l.objs[i].Source.Line)
	}
	for _, err := range l.errs[errs:] {
		var e *Error
		if errors.As(err, &e) && e.Source.File == name {
			e.Source = at(e.Source.Line)
			e.Msg = "in the kustomize output: " + e.Msg
		}
	}
}

// build runs kustomize on dir. Errors are *Errors.
func (k *kustFS) build(name, dir string) (res []*resource.Resource, err error) {
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	defer func() {
		// kyaml has panicked on crafted input before; a bad repository
		// must not take the process down.
		if r := recover(); r != nil {
			res, err = nil, newError(Source{File: name}, ErrInternal, fmt.Sprintf("kustomize panicked: %v", r))
		}
	}()
	opts := krusty.MakeDefaultOptions()
	// Unspecified keeps a kustomization's sortOptions and otherwise
	// sorts like `kustomize build` (legacy order), without log noise.
	opts.Reorder = krusty.ReorderOptionUnspecified
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.PluginConfig = types.DisabledPluginConfig()
	opts.AddManagedbyLabel = false
	m, runErr := krusty.MakeKustomizer(opts).Run(k, k.abs(dir))
	if k.refusal != nil {
		// Whatever kustomize made of the refused read, this is the
		// real reason.
		return nil, k.refusal
	}
	if runErr != nil {
		msg := strings.Join(strings.Fields(strings.ReplaceAll(runErr.Error(), "\n", "; ")), " ")
		return nil, newError(Source{File: name}, ErrKustomize, "kustomize build failed: "+msg)
	}
	return m.Resources(), nil
}

// stripBuildAnnotations removes the annotations kustomize uses internally,
// and its origin annotation when truce asked for it, so that they are not
// mistaken for what the user wrote. An origin annotation the user asked for
// (buildMetadata: [originAnnotations]) stays: kustomize-controller and Argo
// CD would apply it too.
func stripBuildAnnotations(r *resource.Resource, injected bool) error {
	a := r.GetAnnotations()
	changed := false
	for key := range a {
		if strings.HasPrefix(key, internalAnnotations) || (injected && key == originAnnotation) {
			delete(a, key)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return r.SetAnnotations(a)
}

// sourceOf maps a rendered resource back to where it was written, using the
// origin annotation kustomize adds when asked to.
func (k *kustFS) sourceOf(r *resource.Resource, dir, kust string) Source {
	fallback := Source{File: kust, Kustomization: kust}
	origin, err := r.GetOrigin()
	if err != nil || origin == nil || origin.Repo != "" {
		return fallback
	}
	switch {
	case origin.Path != "":
		file := path.Join(dir, filepath.ToSlash(origin.Path))
		return Source{File: k.t.display(file), Line: k.objectLine(file, r), Kustomization: kust}
	case origin.ConfiguredIn != "":
		file := path.Join(dir, filepath.ToSlash(origin.ConfiguredIn))
		return Source{File: k.t.display(file), Line: k.generatorLine(file, r), Kustomization: kust}
	}
	return fallback
}

// objectLine finds the line in file where the object that became r starts
// (see OriginLine); 0 means no unambiguous match.
func (k *kustFS) objectLine(file string, r *resource.Resource) int {
	real, err := resolveIn(k.t.fsys, file)
	if err != nil {
		return 0
	}
	objs, ok := k.parsed[real]
	if !ok {
		data, ok := k.files[real]
		if !ok {
			return 0
		}
		d := newDecoder(k.l.opts)
		d.decodeStream(file, data)
		objs = d.objs
		if k.parsed == nil {
			k.parsed = make(map[string][]Object)
		}
		k.parsed[real] = objs
	}
	return OriginLine(objs, r.GetKind(), r.GetName(), r.GetNamespace())
}

// generatorLine finds the configMapGenerator or secretGenerator entry in
// the kustomization file that generated r, or the line of the generator
// list itself.
func (k *kustFS) generatorLine(file string, r *resource.Resource) int {
	var field string
	switch r.GetKind() {
	case "ConfigMap":
		field = "configMapGenerator"
	case "Secret":
		field = "secretGenerator"
	default:
		return 0
	}
	real, err := resolveIn(k.t.fsys, file)
	if err != nil {
		return 0
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(k.files[real], &doc); err != nil || len(doc.Content) != 1 {
		return 0
	}
	root := doc.Content[0]
	if root.Kind != yaml3.MappingNode {
		return 0
	}
	name := r.GetName()
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != field {
			continue
		}
		list := root.Content[i+1]
		best, bestLen := root.Content[i].Line, -1
		for _, item := range list.Content {
			if item.Kind != yaml3.MappingNode {
				continue
			}
			for j := 0; j+1 < len(item.Content); j += 2 {
				gen := item.Content[j+1].Value
				if item.Content[j].Value == "name" && strings.Contains(name, gen) && len(gen) > bestLen {
					best, bestLen = item.Line, len(gen)
				}
			}
		}
		return best
	}
	return 0
}

// kustFS is the file system kustomize sees: the tree t, read-only, with
// every path resolved inside the repository root, every file bounded by
// the size limits and checked for alias bombs before kustomize parses it,
// and every kustomization checked for remote references before kustomize
// can act on them.
type kustFS struct {
	t *tree
	l *loader
	// name is the kustomization being built, as shown to users.
	name string
	// budget is what is left of MaxTotalBytes for this build; a base
	// included many times counts every time.
	budget int64
	// top is the resolved path of the kustomization being built;
	// injected records that origin tracking was switched on in it.
	top      string
	injected bool
	// files holds what kustomize read, by resolved path, for mapping
	// objects back to lines; parsed caches decoded files.
	files  map[string][]byte
	parsed map[string][]Object
	// refusal is the first read this file system refused on purpose.
	refusal *Error
	// edit changes the kustomization file top before kustomize sees it;
	// edited caches its result, as kustomize may read the file again.
	edit   KustomizationEdit
	edited []byte
}

var _ filesys.FileSystem = (*kustFS)(nil)

var errReadOnly = errors.New("truce does not let kustomize write to the repository")

func (k *kustFS) refuse(e *Error) error {
	if k.refusal == nil {
		k.refusal = e
	}
	return e
}

// rel maps a kustomize path to a resolved path of the tree.
func (k *kustFS) rel(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(k.t.vroot, p)
	}
	r, err := filepath.Rel(k.t.vroot, filepath.Clean(p))
	if err != nil {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: ErrOutsideRoot}
	}
	return resolveIn(k.t.fsys, filepath.ToSlash(r))
}

func (k *kustFS) abs(rel string) string {
	return filepath.Join(k.t.vroot, filepath.FromSlash(rel))
}

// check records a path outside the repository as the reason for the
// build's failure.
func (k *kustFS) check(p string, err error) error {
	if !errors.Is(err, ErrOutsideRoot) {
		return err
	}
	reason := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		reason = pe.Err.Error()
	}
	return k.refuse(newError(Source{File: k.name}, err, fmt.Sprintf("refusing to read %s: %s", p, reason)))
}

func (k *kustFS) ReadFile(p string) ([]byte, error) {
	r, err := k.rel(p)
	if err != nil {
		return nil, k.check(p, err)
	}
	info, err := fs.Stat(k.t.fsys, r)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New("not a regular file")}
	}
	name := k.t.display(r)
	if info.Size() > k.l.opts.MaxFileBytes {
		return nil, k.refuse(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"file is %s, larger than the %s limit ("+k.l.opts.LimitHint("MaxFileBytes")+")",
			formatBytes(info.Size()), formatBytes(k.l.opts.MaxFileBytes))))
	}
	if k.budget -= info.Size(); k.budget < 0 {
		return nil, k.refuse(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"kustomize read more than the %s limit ("+k.l.opts.LimitHint("MaxTotalBytes")+") to build this kustomization",
			formatBytes(k.l.opts.MaxTotalBytes))))
	}
	f, err := k.t.fsys.Open(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, k.l.opts.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > k.l.opts.MaxFileBytes {
		return nil, k.refuse(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"file is larger than the %s limit ("+k.l.opts.LimitHint("MaxFileBytes")+")", formatBytes(k.l.opts.MaxFileBytes))))
	}
	if e := k.l.checkKustomizeInput(name, data); e != nil {
		return nil, k.refuse(e)
	}
	if isKustomizationName(path.Base(r)) {
		if e := k.checkKustomization(r, data); e != nil {
			return nil, k.refuse(e)
		}
	} else if e := k.checkPluginConfig(name, data); e != nil {
		return nil, k.refuse(e)
	}
	// What the user wrote, for mapping objects back to lines.
	k.files[r] = data
	if r == k.top && k.edit != nil {
		if data, err = k.editTop(r, name, data); err != nil {
			return nil, err
		}
	}
	if r == k.top {
		// Ask kustomize to record where every resource came from; the
		// annotations are removed again from the output.
		if out, ok := withOriginAnnotations(data); ok {
			k.injected = true
			return out, nil
		}
	}
	return data, nil
}

func (k *kustFS) Open(p string) (filesys.File, error) {
	data, err := k.ReadFile(p)
	if err != nil {
		return nil, err
	}
	r, _ := k.rel(p)
	info, err := fs.Stat(k.t.fsys, r)
	if err != nil {
		return nil, err
	}
	return &readOnlyFile{Reader: bytes.NewReader(data), info: info}, nil
}

func (k *kustFS) IsDir(p string) bool {
	r, err := k.rel(p)
	if err != nil {
		return false
	}
	info, err := fs.Stat(k.t.fsys, r)
	return err == nil && info.IsDir()
}

func (k *kustFS) Exists(p string) bool {
	r, err := k.rel(p)
	if err != nil {
		return false
	}
	_, err = fs.Stat(k.t.fsys, r)
	return err == nil
}

func (k *kustFS) ReadDir(p string) ([]string, error) {
	r, err := k.rel(p)
	if err != nil {
		return nil, k.check(p, err)
	}
	entries, err := fs.ReadDir(k.t.fsys, r)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// CleanedAbs splits p into a directory and a file name with symlinks
// resolved, as the on-disk implementation does, so that kustomize's
// root-only load restriction sees real locations.
func (k *kustFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r, err := k.rel(p)
	if err != nil {
		return "", "", k.check(p, err)
	}
	info, err := fs.Stat(k.t.fsys, r)
	if err != nil {
		return "", "", err
	}
	if info.IsDir() {
		return filesys.ConfirmedDir(k.abs(r)), "", nil
	}
	return filesys.ConfirmedDir(k.abs(path.Dir(r))), path.Base(r), nil
}

func (k *kustFS) Glob(pattern string) ([]string, error) {
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(k.t.vroot, pattern)
	}
	r, err := filepath.Rel(k.t.vroot, filepath.Clean(pattern))
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return nil, k.refuse(newError(Source{File: k.name}, ErrOutsideRoot, fmt.Sprintf("refusing to read %s: %v", pattern, ErrOutsideRoot)))
	}
	matches, err := fs.Glob(k.t.fsys, filepath.ToSlash(r))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(matches))
	for i, m := range matches {
		out[i] = k.abs(m)
	}
	if !filesys.IsHiddenFilePath(pattern) {
		out = filesys.RemoveHiddenFiles(out)
	}
	return out, nil
}

func (k *kustFS) Walk(p string, fn filepath.WalkFunc) error {
	r, err := k.rel(p)
	if err != nil {
		return k.check(p, err)
	}
	return fs.WalkDir(k.t.fsys, r, func(q string, e fs.DirEntry, err error) error {
		var info fs.FileInfo
		if err == nil {
			info, err = e.Info()
		}
		return fn(k.abs(q), info, err)
	})
}

func (k *kustFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (k *kustFS) Mkdir(string) error                  { return errReadOnly }
func (k *kustFS) MkdirAll(string) error               { return errReadOnly }
func (k *kustFS) RemoveAll(string) error              { return errReadOnly }
func (k *kustFS) WriteFile(string, []byte) error      { return errReadOnly }

// readOnlyFile is a filesys.File over bytes already read.
type readOnlyFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *readOnlyFile) Write([]byte) (int, error)         { return 0, errReadOnly }
func (f *readOnlyFile) Close() error                      { return nil }
func (f *readOnlyFile) Stat() (fs.FileInfo, error)        { return f.info, nil }
func (f *readOnlyFile) ReadFrom(io.Reader) (int64, error) { return 0, errReadOnly }

// withOriginAnnotations adds originAnnotations to the buildMetadata of a
// kustomization, reporting whether it changed anything.
func withOriginAnnotations(data []byte) ([]byte, bool) {
	rn, err := kyaml.Parse(string(data))
	if err != nil {
		return data, false // kustomize reports the syntax error
	}
	seq, err := rn.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "buildMetadata"))
	if err != nil || seq == nil || seq.YNode().Kind != kyaml.SequenceNode {
		return data, false
	}
	for _, c := range seq.YNode().Content {
		if c.Value == types.OriginAnnotations {
			return data, false
		}
	}
	seq.YNode().Content = append(seq.YNode().Content,
		&kyaml.Node{Kind: kyaml.ScalarNode, Tag: kyaml.NodeTagString, Value: types.OriginAnnotations})
	out, err := rn.String()
	if err != nil {
		return data, false
	}
	return []byte(out), true
}

// checkKustomization refuses a kustomization that refers to anything
// kustomize would fetch over the network or build with an external
// program. It runs before kustomize acts on the file; a file kustomize
// cannot parse is left for kustomize to report.
func (k *kustFS) checkKustomization(rel string, data []byte) *Error {
	var kust types.Kustomization
	if err := kust.Unmarshal(data); err != nil {
		return nil
	}
	kust.FixKustomization()
	name := k.t.display(rel)
	dir := path.Dir(rel)
	if len(kust.HelmCharts) > 0 || kust.HelmGlobals != nil {
		return newError(Source{File: name, Line: lineContaining(data, "helmChart")}, ErrRemoteReference,
			"helmCharts are not supported: inflating them needs the helm binary and usually the network; "+
				"render the chart into the repository instead")
	}
	local := func(value string) bool {
		_, err := resolveIn(k.t.fsys, path.Join(dir, value))
		return err == nil
	}
	if field, value := RemoteReference(&kust, local); value != "" {
		return newError(Source{File: name, Line: lineContaining(data, value)}, ErrRemoteReference, fmt.Sprintf(
			"%s entry %q is remote: truce renders kustomizations offline and does not fetch remote bases or files; "+
				"vendor it into the repository", field, value))
	}
	return nil
}

// checkPluginConfig refuses builtin generator and transformer
// configurations (apiVersion: builtin, listed under generators: or
// transformers:) that would make kustomize fetch a URL or run helm.
func (k *kustFS) checkPluginConfig(name string, data []byte) *Error {
	if !bytes.Contains(data, []byte("builtin")) {
		return nil
	}
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return nil // EOF, or not YAML (e.g. a generator's data file)
		}
		if doc["apiVersion"] != "builtin" {
			continue
		}
		if doc["kind"] == "HelmChartInflationGenerator" {
			return newError(Source{File: name}, ErrRemoteReference,
				"HelmChartInflationGenerator is not supported: it needs the helm binary and usually the network")
		}
		if bad := PluginRemoteReference(doc); bad != "" {
			return newError(Source{File: name, Line: lineContaining(data, bad)}, ErrRemoteReference, fmt.Sprintf(
				"%v %q refers to %q, which is remote: truce renders kustomizations offline", doc["kind"], nameOf(doc), bad))
		}
	}
}

func nameOf(doc map[string]any) any {
	if m, ok := doc["metadata"].(map[string]any); ok {
		return m["name"]
	}
	return ""
}

// lineContaining returns the first line of data containing s, or 0.
func lineContaining(data []byte, s string) int {
	if s == "" {
		return 0
	}
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 0
	}
	return bytes.Count(data[:i], []byte("\n")) + 1
}

// checkKustomizeInput refuses alias bombs and absurd nesting in a file
// kustomize is about to parse, which kustomize itself would happily expand.
// Content that is not YAML (a generator's data file) passes: kustomize does
// not parse it as YAML either. Duplicate keys are left to kustomize, whose
// behaviour on them is what GitOps tools reproduce.
func (d *decoder) checkKustomizeInput(name string, data []byte) (e *Error) {
	defer func() {
		if r := recover(); r != nil {
			e = newError(Source{File: name}, ErrInternal, fmt.Sprintf("YAML parser panicked: %v", r))
		}
	}()
	data = bytes.TrimPrefix(data, utf8BOM)
	s := sectionScanner{data: data, line: 1}
	for {
		sec, ok := s.next()
		if !ok {
			return nil
		}
		if isBlankYAML(sec.data) {
			continue
		}
		lines := newLineMap(sec.data, sec.line, sec.line+bytes.Count(sec.data, []byte("\n")))
		dec := yaml3.NewDecoder(bytes.NewReader(sec.data))
		for {
			var doc yaml3.Node
			if err := dec.Decode(&doc); err != nil {
				break
			}
			c := nodeChecker{
				maxDepth:          d.opts.MaxDepth,
				maxAliasNodes:     d.opts.MaxAliasNodes,
				aliasLeft:         d.aliasLeft,
				lines:             lines,
				skipDuplicateKeys: true,
			}
			c.measure(&doc, 0)
			d.aliasLeft = c.aliasLeft
			if p := c.problem; p != nil && (p.kind == ErrAliasExpansion || p.kind == ErrTooDeep) {
				return newError(Source{File: name, Line: lines.file(p.line)}, p.kind, p.msg)
			}
		}
	}
}
