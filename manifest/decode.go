package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"

	yaml3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Decode reads one stream of YAML or JSON documents, such as the contents
// of a single file, and returns the Kubernetes objects in it in order. name
// is used as Source.File for every object and error.
//
// Decode keeps going after a bad document so that a user sees every problem
// at once: it returns the objects that decoded cleanly together with an
// errors.Join of one *Error per bad document. Callers that must not act on
// partial input should treat any non-nil error as failure. Limits that
// protect the process (Options.MaxFileBytes, MaxDocuments, MaxAliasNodes)
// stop decoding as soon as they are exceeded.
func Decode(name string, r io.Reader, opts Options) ([]Object, error) {
	d := newDecoder(opts)
	if data, ok := d.read(name, r); ok {
		d.decodeStream(name, data)
	}
	return d.result()
}

// decoder carries the per-call budgets and the results of one Decode or
// LoadPaths call across all files.
type decoder struct {
	opts Options
	objs []Object
	errs []error

	bytesRead int64
	docs      int
	// aliasLeft is the remaining Options.MaxAliasNodes budget.
	aliasLeft int
	// stopped is set once a call-wide limit is exceeded; nothing more is
	// decoded after that.
	stopped bool

	// workers is how many sections are decoded at once; 0 is GOMAXPROCS.
	workers int
	// The fields below are set on the decoder of a section decoded
	// ahead (decodeAhead). record makes countDocuments note its charges
	// instead of applying them; reserve takes a section's alias
	// expansion from the batch's budget before pass 2 expands it, and
	// deferred notes that it could not.
	record   bool
	charges  []charge
	reserve  func(nodes int) bool
	deferred bool
}

// charge is one countDocuments call of a section decoded ahead.
type charge struct {
	src Source
	n   int
}

func newDecoder(opts Options) *decoder {
	opts = opts.withDefaults()
	return &decoder{opts: opts, aliasLeft: opts.MaxAliasNodes}
}

func (d *decoder) result() ([]Object, error) {
	return d.objs, errors.Join(d.errs...)
}

// fail records a problem that affects only the current document or file.
func (d *decoder) fail(err error) {
	d.errs = append(d.errs, err)
}

// stop records a problem that ends the whole call.
func (d *decoder) stop(err error) {
	d.errs = append(d.errs, err)
	d.stopped = true
}

// read reads all of r, enforcing MaxFileBytes and MaxTotalBytes without ever
// buffering more than one byte beyond the smaller of the two.
func (d *decoder) read(name string, r io.Reader) ([]byte, bool) {
	limit := d.opts.MaxFileBytes
	totalLeft := d.opts.MaxTotalBytes - d.bytesRead
	if totalLeft < limit {
		limit = totalLeft
	}
	limit = min(limit, math.MaxInt64-1) // room for the overflow byte
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	d.bytesRead += int64(len(data))
	if err != nil {
		d.fail(ioError(name, err))
		return nil, false
	}
	if int64(len(data)) > limit {
		if limit == d.opts.MaxFileBytes {
			d.fail(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
				"input is larger than the %s limit ("+d.opts.LimitHint("MaxFileBytes")+")", formatBytes(d.opts.MaxFileBytes))))
			return nil, false
		}
		d.stop(newError(Source{File: name}, ErrTooLarge, fmt.Sprintf(
			"total input exceeds the %s limit ("+d.opts.LimitHint("MaxTotalBytes")+")", formatBytes(d.opts.MaxTotalBytes))))
		return nil, false
	}
	return data, true
}

// countDocuments charges n documents against MaxDocuments and reports
// whether decoding may continue.
func (d *decoder) countDocuments(src Source, n int) bool {
	if d.record {
		d.charges = append(d.charges, charge{src: src, n: n})
		return true
	}
	d.docs += n
	if d.docs > d.opts.MaxDocuments {
		d.stop(newError(src, ErrTooManyDocuments, fmt.Sprintf(
			"more than %d documents ("+d.opts.LimitHint("MaxDocuments")+"); not decoding any further", d.opts.MaxDocuments)))
		return false
	}
	return true
}

var utf8BOM = []byte("\xef\xbb\xbf")

// decodeStream decodes one file's contents. Like kubectl, a stream whose
// first non-space character is '{' is read as a sequence of JSON values and
// anything else as "---"-separated YAML.
func (d *decoder) decodeStream(name string, data []byte) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if bytes.HasPrefix(bytes.TrimLeftFunc(data, unicode.IsSpace), []byte("{")) {
		d.decodeJSONStream(name, data)
		return
	}
	d.decodeYAMLStream(name, data, 1)
}

// decodeYAMLStream decodes data, whose first byte is on line firstLine of
// the file, section by section: in batches, each decoded on several cores
// and merged in order (decodeSections).
func (d *decoder) decodeYAMLStream(name string, data []byte, firstLine int) {
	s := sectionScanner{data: data, line: firstLine}
	batch := make([]section, 0, sectionBatch)
	for !d.stopped {
		sec, ok := s.next()
		if ok {
			batch = append(batch, sec)
		}
		if len(batch) == cap(batch) || !ok && len(batch) > 0 {
			d.decodeSections(name, batch)
			batch = batch[:0]
		}
		if !ok {
			return
		}
	}
}

// decodeSection decodes one "---" section on its own, in order with the
// call's budgets.
func (d *decoder) decodeSection(name string, sec section) {
	if sec.badSeparator != "" {
		d.fail(newError(Source{File: name, Line: sec.separatorLine}, ErrSyntax, fmt.Sprintf(
			"invalid document separator %q: only a comment may follow \"---\" on the same line "+
				"(kubectl rejects it too); the document that follows is skipped", sec.badSeparator)))
		return
	}
	if isBlankYAML(sec.data) {
		return
	}
	doc, lastLine := sectionDocument(sec)
	d.guard(Source{File: name, Line: sec.line}, func() {
		d.decodeYAMLDocument(name, doc, sec.line, lastLine)
	})
}

// sectionDocument returns what the parsers are given for sec, and the file
// line the section ends on.
func sectionDocument(sec section) ([]byte, int) {
	doc := sec.data
	if !bytes.HasSuffix(doc, []byte("\n")) {
		// YAMLReader hands every line to the parser with a '\n'; the
		// last line of a file may lack one, which can matter (e.g.
		// for a truncated UTF-16 stream).
		doc = append(doc[:len(doc):len(doc)], '\n')
	}
	return doc, sec.line + bytes.Count(sec.data, []byte("\n"))
}

// guard runs fn and turns a panic into an ErrInternal error. The YAML
// libraries are ports of C code that have panicked on crafted input before;
// one bad file must not take down an admission webhook.
func (d *decoder) guard(src Source, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			d.fail(newError(src, ErrInternal, fmt.Sprintf("decoder panicked: %v", r)))
		}
	}()
	fn()
}

// decodeYAMLDocument decodes one "---" section that spans lines firstLine
// to lastLine of the file.
func (d *decoder) decodeYAMLDocument(name string, data []byte, firstLine, lastLine int) {
	lines := newLineMap(data, firstLine, lastLine)
	doc, ok := d.checkYAMLDocument(name, data, lines)
	if !ok {
		return
	}

	// Pass 2: decode exactly like kubectl does, so that scalars get the
	// same JSON types. Strict mode rejects duplicate keys that only
	// collide after YAML resolution (e.g. 1 and 0x1). It also rejects a
	// key that overrides one brought in by a merge key ("<<"), which is
	// legitimate and accepted by kubectl, so documents with merge keys
	// fall back to the lenient decoder; pass 1 has already rejected
	// textually duplicated keys in them.
	js, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil && doc.sawMerge && isDuplicateKeyMsg(err.Error()) {
		js, err = sigsyaml.YAMLToJSON(data)
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "yaml:") {
			d.fail(yamlError(name, lines, err))
		} else {
			d.fail(newError(doc.src, ErrInvalidObject, "cannot convert document to JSON: "+err.Error()))
		}
		return
	}
	if bytes.Equal(js, []byte("null")) {
		return // kubectl skips documents that decode to null.
	}
	// emit also rejects documents that are not mappings. That check
	// happens on the JSON, not on the node tree, because the YAML 1.1 and
	// 1.2 resolvers disagree on what is null (e.g. a lone "!").
	d.emit(doc.src, js, doc.itemLines)
}

// yamlDoc is what pass 1 learns about a document.
type yamlDoc struct {
	// src is where the document's content starts.
	src Source
	// itemLines are the file lines of the elements of a top-level items
	// sequence, nil if there is none.
	itemLines []int
	// sawMerge records a merge key ("<<") anywhere in the document.
	sawMerge bool
}

// checkYAMLDocument is pass 1: it builds a yaml.v3 node tree, which keeps
// positions and does not expand aliases, and checks it before anything
// expands aliases. It reports whether decoding should continue. The tree is
// dropped on return, before pass 2 may need as much memory again.
func (d *decoder) checkYAMLDocument(name string, data []byte, lines lineMap) (yamlDoc, bool) {
	at := func(relLine int) Source {
		return Source{File: name, Line: lines.file(relLine)}
	}
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var doc yaml3.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.fail(yamlError(name, lines, err))
			return yamlDoc{}, false
		}
		// io.EOF: the section holds only comments or directives as far
		// as yaml.v3 is concerned. go-yaml v2, which kubectl uses, is
		// stricter about some of them (e.g. a tab before a comment),
		// so let it have a say too.
		switch js, err := sigsyaml.YAMLToJSON(data); {
		case err != nil:
			d.fail(yamlError(name, lines, err))
		case !bytes.Equal(js, []byte("null")):
			d.fail(newError(at(0), ErrSyntax,
				"YAML parsers disagree about this document (yaml.v3 sees none, kubectl's go-yaml v2 does); refusing it as ambiguous"))
		}
		return yamlDoc{}, false
	}
	var extra yaml3.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.fail(yamlError(name, lines, err))
		return yamlDoc{}, false
	default:
		// kubectl only splits on "---" lines and then decodes the first
		// document of each section, silently dropping the rest.
		d.fail(newError(at(extra.Line), ErrSyntax,
			"a second YAML document starts here without a \"---\" line before it; kubectl would silently ignore it"))
		return yamlDoc{}, false
	}
	if doc.Kind != yaml3.DocumentNode || len(doc.Content) != 1 {
		return yamlDoc{}, false
	}
	root := doc.Content[0]
	info := yamlDoc{src: at(root.Line)}
	if !d.countDocuments(info.src, 1) {
		return yamlDoc{}, false
	}
	c := nodeChecker{
		maxDepth:      d.opts.MaxDepth,
		maxAliasNodes: d.opts.MaxAliasNodes,
		aliasLeft:     d.aliasLeft,
		lines:         lines,
	}
	c.measure(root, 0)
	d.aliasLeft = c.aliasLeft
	if p := c.problem; p != nil {
		e := newError(at(p.line), p.kind, p.msg)
		if p.kind == ErrAliasExpansion {
			d.stop(e)
		} else {
			d.fail(e)
		}
		return yamlDoc{}, false
	}
	if d.reserve != nil && !d.reserve(d.opts.MaxAliasNodes-c.aliasLeft) {
		d.deferred = true
		return yamlDoc{}, false
	}
	info.sawMerge = c.sawMerge
	if root.Kind == yaml3.MappingNode {
		info.itemLines = itemLines(root, lines)
	}
	return info, true
}

// yamlError converts an error from go-yaml about a section into an *Error
// positioned in the file.
func yamlError(name string, lines lineMap, err error) *Error {
	line, msg := relocateYAMLError(err, lines)
	if line <= 0 {
		line = lines.first
	}
	src := Source{File: name, Line: line}
	if isDuplicateKeyMsg(msg) {
		return newError(src, ErrDuplicateKey, "duplicate key: "+msg)
	}
	return newError(src, ErrSyntax, "invalid YAML: "+msg)
}

func isDuplicateKeyMsg(msg string) bool {
	return strings.Contains(msg, "already set in map") || strings.Contains(msg, "already defined")
}

// isBlankYAML reports whether data holds nothing but blank lines, comments
// and document start markers, all in printable ASCII. Such sections are
// common ("---" at the top of a file) and are skipped without running a
// parser, which also makes a file of millions of "---" lines cheap. Anything
// else, including comments with control characters or invalid UTF-8 that
// go-yaml rejects, goes to the parser.
func isBlankYAML(data []byte) bool {
	comment := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if i == 0 || data[i-1] == '\n' {
			// "---" followed by a blank is a document start marker
			// ("---x" is a scalar).
			if rest := data[i:]; bytes.HasPrefix(rest, []byte("---")) &&
				(len(rest) == 3 || rest[3] == ' ' || rest[3] == '\r' || rest[3] == '\n') {
				i += 2
				continue
			}
		}
		switch {
		case c == '\n', c == '\r': // go-yaml also ends lines at a lone CR
			comment = false
		case comment && c == '\t':
		case c < 0x20, c >= 0x7F:
			return false // including tabs outside comments, which go-yaml rejects
		case comment, c == ' ':
		case c == '#':
			comment = true
		default:
			return false
		}
	}
	return true
}

// section is the text between two "---" separator lines.
type section struct {
	data []byte
	// line is the file line of data's first byte.
	line int
	// badSeparator is the text after "---" when the separator line that
	// opened this section carries content; separatorLine is its line.
	badSeparator  string
	separatorLine int
}

// sectionScanner splits a YAML stream the way k8s.io/apimachinery's
// YAMLReader does: a line that starts with "---" ends the current document,
// and only whitespace or a comment may follow on that line. It works on
// byte offsets so that the starting line of every section is known.
type sectionScanner struct {
	data []byte
	pos  int
	line int
	done bool

	pendingBad     string
	pendingSepLine int
}

func (s *sectionScanner) next() (section, bool) {
	if s.done {
		return section{}, false
	}
	sec := section{line: s.line, badSeparator: s.pendingBad, separatorLine: s.pendingSepLine}
	s.pendingBad = ""
	start := s.pos
	for s.pos < len(s.data) {
		lineStart, lineEnd := s.pos, len(s.data)
		if i := bytes.IndexByte(s.data[s.pos:], '\n'); i >= 0 {
			lineEnd = s.pos + i
			s.pos = lineEnd + 1
		} else {
			s.pos = lineEnd
		}
		lineNo := s.line
		s.line++
		line := s.data[lineStart:lineEnd]
		if !bytes.HasPrefix(line, []byte("---")) {
			continue
		}
		if rest := bytes.TrimSpace(line[3:]); len(rest) > 0 && rest[0] != '#' {
			s.pendingBad = string(line)
			s.pendingSepLine = lineNo
		} else if lineStart == start {
			// Like YAMLReader, a separator that would end an empty
			// document is kept as the first line of the next one.
			// Usually it is then just YAML's own document start
			// marker, but "---#x" is a plain scalar to YAML.
			continue
		}
		sec.data = s.data[start:lineStart]
		return sec, true
	}
	s.done = true
	sec.data = s.data[start:]
	return sec, true
}

// lineMap converts go-yaml's line numbers within a section into file lines.
// Files are numbered by '\n' like kubectl, editors and grep do, but go-yaml
// also counts a lone CR and the Unicode breaks NEL, LS and PS as line
// breaks; sections containing those get an explicit table.
type lineMap struct {
	// first and last are the file lines the section spans. Parsers may
	// report a position just past the end of the input; it is clamped
	// to last.
	first, last int
	// table[i] is the file line of go-yaml line i+1; nil when the two
	// numberings agree.
	table []int
}

func newLineMap(data []byte, firstLine, lastLine int) lineMap {
	m := lineMap{first: firstLine, last: lastLine}
	if !hasYAMLOnlyBreaks(data) {
		return m
	}
	line := firstLine
	m.table = append(m.table, line)
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i++
			line++
		case data[i] == '\n':
			line++
		case data[i] == '\r':
		case data[i] == 0xC2 && i+1 < len(data) && data[i+1] == 0x85:
			i++
		case data[i] == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
			i += 2
		default:
			continue
		}
		m.table = append(m.table, line)
	}
	return m
}

// hasYAMLOnlyBreaks reports whether data contains a line break that go-yaml
// counts but '\n'-based numbering does not.
func hasYAMLOnlyBreaks(data []byte) bool {
	for i := 0; ; i++ {
		j := bytes.IndexByte(data[i:], '\r')
		if j < 0 {
			break
		}
		i += j
		if i+1 == len(data) || data[i+1] != '\n' {
			return true
		}
	}
	return bytes.Contains(data, []byte("\u0085")) || bytes.Contains(data, []byte("\u2028")) || bytes.Contains(data, []byte("\u2029"))
}

// file returns the file line of go-yaml line n (1-based); n <= 0, which
// go-yaml uses for "no line", maps to the section's first line.
func (m lineMap) file(n int) int {
	if n <= 0 {
		return m.first
	}
	if m.table == nil {
		return min(m.first-1+n, m.last)
	}
	return min(m.table[min(n, len(m.table))-1], m.last)
}
