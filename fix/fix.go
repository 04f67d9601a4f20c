// Package fix proposes fixes for objects that do not settle, in order of
// preference (the most durable first), as edits to the user's files:
//
//  1. put the mutation in Git (the stored value written into the manifest,
//     or a kustomize patch);
//  2. switch mutate to validate (a ValidatingAdmissionPolicy in Warn that
//     enforces the value, replacing the mutating binding);
//  3. Argo CD server-side diff with IncludeMutationWebhook;
//  4. for a field a controller writes (an autoscaler's replicas), removing
//     it from Git so that the controller owns it alone;
//  5. narrow ignore rules (Argo CD ignoreDifferences with
//     RespectIgnoreDifferences, or Flux spec.ignore), scoped to the object
//     and fields of the loop.
//
// Plus, for the rules of aggregated ClusterRoles, Argo CD's
// ignoreAggregatedRoles, and for copies pruned under label tracking,
// switching Argo CD to annotation tracking. Package check verifies each candidate by simulating
// again with the edits applied; package fix only writes edits, and every
// edit goes through fix/yamledit, which keeps the rest of each file byte for
// byte.
package fix

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/internal/unidiff"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/world"
	"github.com/truce-dev/truce/simulate"
)

// Kind names a kind of fix; the names are drift's, shared with truce
// sync's advice.
type Kind = drift.FixKind

// Kinds of fixes, in order of preference.
const (
	KindGitValue           = drift.FixGitValue
	KindValidatingPolicy   = drift.FixValidatingPolicy
	KindServerSideDiff     = drift.FixServerSideDiff
	KindAggregatedRoles    = drift.FixIgnoreAggregatedRoles
	KindGiveToController   = drift.FixGiveToController
	KindIgnoreRule         = drift.FixIgnoreRule
	KindTrackingAnnotation = drift.FixTrackingAnnotation
)

// Kinds lists every kind of fix, in order of preference.
func Kinds() []Kind {
	return []Kind{KindGitValue, KindValidatingPolicy, KindServerSideDiff, KindAggregatedRoles, KindGiveToController, KindIgnoreRule, KindTrackingAnnotation}
}

// Problem is an object that does not settle, with what a fix needs to know.
type Problem struct {
	// Tool is "argocd" or "flux"; App, Kustomization or HelmRelease is
	// the unit's settings (nil when the tool ran with its defaults).
	Tool          string
	App           *gitops.ArgoApplication
	Kustomization *gitops.FluxKustomization
	HelmRelease   *gitops.FluxHelmRelease
	ArgoConfig    *gitops.ArgoConfig
	Object        *simulate.Object
	// Source is the manifest's position; zero for objects not in Git.
	Source manifest.Source
	// Admission are the objects configuring admission, with their files
	// (for replacing a mutating binding).
	Admission []manifest.Object
	// Values is where the Helm values of the unit rendering the object
	// are written; nil when no chart renders it.
	Values *world.ValuesTarget
}

// Candidate is one proposed fix.
type Candidate struct {
	Kind                        Kind
	Title, Description, Warning string
	// Files holds the new content of every file the fix writes; Before the
	// old content (nil for files it creates). After Compact, Files is nil:
	// Content gives a file's new content. Contents are shared with other
	// candidates and the parsed files: never change them in place.
	Files  map[string][]byte
	Before map[string][]byte
	// edits are the new contents kept by Compact, each as the part that
	// differs from Before.
	edits map[string]edit
	// FromLive asks for the fix to be verified from the state the current
	// Git leaves in the cluster, not from an empty one: what the tool owns
	// there (server-side apply's managed fields, kubectl's
	// last-applied-configuration) decides what dropping a field does.
	// Fields lists the fields the fix takes out of Git.
	FromLive bool
	Fields   []string
	// Unsafe is set by the verification: the tool writes the fields once
	// more on the way (Warning says what happens), so the fix is not
	// offered as verified even when the object settles.
	Unsafe bool
}

// edit is a file's new content as its old one with bytes [start,
// len(old)-end) replaced by middle.
type edit struct {
	start, end int
	middle     []byte
}

// Paths lists the files the fix writes, sorted.
func (c *Candidate) Paths() []string {
	out := make([]string, 0, len(c.Files)+len(c.edits))
	for p := range c.Files {
		out = append(out, p)
	}
	for p := range c.edits {
		if _, ok := c.Files[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Content is the new content of a file the fix writes (nil for others).
func (c *Candidate) Content(path string) []byte {
	if data, ok := c.Files[path]; ok {
		return data
	}
	e, ok := c.edits[path]
	if !ok {
		return nil
	}
	old := c.Before[path]
	out := make([]byte, 0, e.start+len(e.middle)+e.end)
	out = append(out, old[:e.start]...)
	out = append(out, e.middle...)
	return append(out, old[len(old)-e.end:]...)
}

// Creates reports whether the fix creates the file path.
func (c *Candidate) Creates(path string) bool { return c.Before[path] == nil }

// Compact keeps of each file the fix writes only the part that differs
// from its old content (Before, which the candidates of one file share),
// and sets Files to nil; Content, Paths and Diff give what they gave
// before. A check keeps every candidate until its report: a full copy of
// a file of 10,000 documents per candidate was most of its memory.
func (c *Candidate) Compact() {
	if c.Files == nil {
		return
	}
	if c.edits == nil {
		c.edits = make(map[string]edit, len(c.Files))
	}
	for p, data := range c.Files {
		start, end := unidiff.CommonEndsBytes(c.Before[p], data)
		c.edits[p] = edit{start: start, end: end, middle: bytes.Clone(data[start : len(data)-end])}
	}
	c.Files = nil
}

// Diff is a unified diff of one file the fix writes.
func (c *Candidate) Diff(path string) string {
	from := path
	if c.Before[path] == nil {
		from = "/dev/null"
	}
	return unidiff.DiffBytes(c.Before[path], c.Content(path), from, path, 3)
}

// Reader reads the user's files; os.ReadFile by default.
type Reader func(path string) ([]byte, error)

// Candidates returns the fixes that apply to p, in order of preference.
// A fix that cannot be written (no file to edit, an edit the YAML editor
// refuses) is left out, with the reason in skipped.
func Candidates(p Problem, read Reader) (out []*Candidate, skipped []string) {
	return CandidatesFrom(p, NewFiles(read))
}

// CandidatesFrom is Candidates reading files through files, which parses
// each file once for every problem given the same Files.
func CandidatesFrom(p Problem, files *Files) (out []*Candidate, skipped []string) {
	e := &editor{read: files.read, parsed: files, files: map[string]*yamledit.File{}}
	o := p.Object
	add := func(kind Kind, c *Candidate, err error) {
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", kind, err))
			return
		}
		if c != nil {
			c.Kind = kind
			out = append(out, c)
		}
	}
	switch o.Verdict {
	case simulate.Loop, simulate.OutOfSync:
		if !o.InGit {
			break
		}
		fields, values := p.stored()
		admissionLoop := o.Loop == nil || o.Loop.OtherKind == "admission"
		if admissionLoop && len(fields) > 0 {
			c, err := e.fresh().gitValue(p, fields, values)
			add(KindGitValue, c, err)
			c, err = e.fresh().validatingPolicy(p, fields, values)
			add(KindValidatingPolicy, c, err)
			if p.Tool == "argocd" {
				c, err = e.fresh().serverSideDiff(p)
				add(KindServerSideDiff, c, err)
			}
		}
		if p.Tool == "argocd" && p.aggregatedRules() {
			c, err := e.fresh().ignoreAggregatedRoles(p)
			add(KindAggregatedRoles, c, err)
		}
		if o.Loop != nil && o.Loop.OtherKind == "controller" && len(p.loopFields()) > 0 {
			c, err := e.fresh().giveToController(p)
			add(KindGiveToController, c, err)
		}
		if len(p.loopFields()) > 0 {
			c, err := e.fresh().ignoreRule(p)
			add(KindIgnoreRule, c, err)
		}
	case simulate.Pruned:
		c, err := e.fresh().trackingAnnotation(p)
		add(KindTrackingAnnotation, c, err)
	}
	if o.Verdict == simulate.Loop && !o.InGit {
		c, err := e.fresh().trackingAnnotation(p)
		add(KindTrackingAnnotation, c, err)
	}
	return out, skipped
}

// loopFields are the fields to fix: the loop's, or the drifted ones.
func (p Problem) loopFields() []string {
	if p.Object.Loop != nil {
		var out []string
		for _, f := range p.Object.Loop.Fields {
			if f != "/" {
				out = append(out, f)
			}
		}
		return out
	}
	var out []string
	if p.Object.Drift != nil {
		for _, f := range p.Object.Drift.Fields {
			if f.IgnoredBy == "" {
				out = append(out, f.Pointer)
			}
		}
	}
	return out
}

// stored returns the loop's fields with the value the cluster stores for
// each, from the tool's last comparison.
func (p Problem) stored() ([]string, map[string]any) {
	values := map[string]any{}
	var fields []string
	if p.Object.Drift == nil {
		return nil, values
	}
	want := map[string]bool{}
	for _, f := range p.loopFields() {
		want[f] = true
	}
	for _, f := range p.Object.Drift.Fields {
		if !want[f.Pointer] || f.IgnoredBy != "" || f.LiveAbsent {
			continue
		}
		fields = append(fields, f.Pointer)
		values[f.Pointer] = f.Live
	}
	sort.Strings(fields)
	return fields, values
}

// Files reads the user's files for fixes and keeps each file parsed: every
// fix edits a file of its own, and a file of thousands of documents took
// longer to parse than the fix took to write. A file is read again every
// time it is asked for, and parsed again when its content changed.
// Files is safe for concurrent use.
type Files struct {
	read Reader
	// once reads each file only the first time (NewSnapshot).
	once   bool
	mu     sync.Mutex
	parsed map[string]parsedFile
}

type parsedFile struct {
	data []byte
	file *yamledit.File // never edited: callers get clones
}

// NewFiles reads files with read (os.ReadFile when nil).
func NewFiles(read Reader) *Files {
	if read == nil {
		read = os.ReadFile
	}
	return &Files{read: read, parsed: map[string]parsedFile{}}
}

// NewSnapshot is NewFiles reading each file once: the fixes of one check
// are edits of the files as that check read them, and reading a file of
// thousands of documents again for each of hundreds of candidates cost a
// copy of it each time.
func NewSnapshot(read Reader) *Files {
	fs := NewFiles(read)
	fs.once = true
	return fs
}

// parse reads path and returns its content and the file parsed from it, to
// edit.
func (fs *Files) parse(path string) (*yamledit.File, []byte, error) {
	if fs.once {
		fs.mu.Lock()
		p, ok := fs.parsed[path]
		fs.mu.Unlock()
		if ok {
			return p.file.Clone(), p.data, nil
		}
	}
	data, err := fs.read(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	fs.mu.Lock()
	p, ok := fs.parsed[path]
	fs.mu.Unlock()
	// Every candidate keeps the content it was made from (Candidate.Before)
	// until the report: they share the one copy kept here instead of each
	// holding the bytes read for it (a check of 10,000 objects in one file
	// has hundreds of candidates of a 1.8 MB file). Nobody writes to it.
	if ok && bytes.Equal(p.data, data) {
		return p.file.Clone(), p.data, nil
	}
	f, err := yamledit.Parse(path, data)
	if err != nil {
		return nil, nil, err
	}
	data = bytes.Clone(data)
	fs.mu.Lock()
	fs.parsed[path] = parsedFile{data: data, file: f}
	fs.mu.Unlock()
	return f.Clone(), data, nil
}

// editor reads and edits files, keeping each file parsed once per fix.
type editor struct {
	read   Reader
	parsed *Files
	files  map[string]*yamledit.File
	before map[string][]byte
	// created holds files the fix creates.
	created map[string][]byte
}

func (e *editor) fresh() *editor {
	return &editor{read: e.read, parsed: e.parsed, files: map[string]*yamledit.File{}, before: map[string][]byte{}, created: map[string][]byte{}}
}

func (e *editor) file(path string) (*yamledit.File, error) {
	if f, ok := e.files[path]; ok {
		return f, nil
	}
	f, data, err := e.parsed.parse(path)
	if err != nil {
		return nil, err
	}
	e.files[path] = f
	e.before[path] = data
	return f, nil
}

// doc returns the file and document index of a manifest position.
func (e *editor) doc(src manifest.Source) (*yamledit.File, int, error) {
	if err := rendered(src); err != nil {
		return nil, 0, err
	}
	if src.File == "" || src.Line == 0 {
		return nil, 0, fmt.Errorf("no file and line to edit")
	}
	f, err := e.file(src.File)
	if err != nil {
		return nil, 0, err
	}
	i, err := f.DocumentAt(src.Line)
	if err != nil {
		return nil, 0, err
	}
	return f, i, nil
}

// candidate collects the edits made so far.
func (e *editor) candidate(title, description, warning string) *Candidate {
	c := &Candidate{Title: title, Description: description, Warning: warning, Files: map[string][]byte{}, Before: map[string][]byte{}}
	for path, f := range e.files {
		if f.Changed() {
			c.Files[path] = f.Content()
			c.Before[path] = e.before[path]
		}
	}
	for path, data := range e.created {
		c.Files[path] = data
		c.Before[path] = nil
	}
	return c
}

// newFileNear returns a path for a file the fix creates next to dir's
// files, not overwriting anything.
func newFileNear(dir, base string, read Reader) string {
	p := filepath.Join(dir, base+".yaml")
	for i := 2; ; i++ {
		if _, err := read(p); err != nil {
			return p
		}
		p = filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", base, i))
	}
}
