package yamledit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/truce-dev/truce/internal/unidiff"
)

// MaxFileBytes is the largest file Parse accepts.
const MaxFileBytes = 8 << 20

var utf8BOM = []byte("\xef\xbb\xbf")

// File is one YAML file, editable in place.
//
// A File is split into documents the way kubectl splits a stream: at every
// line that starts with "---". Sections that hold nothing but comments,
// blank lines and "---" are not documents. Documents are numbered from 0 in
// file order and keep their numbers across edits.
//
// A File is not safe for concurrent use.
type File struct {
	name string
	orig []byte     // the input as given, including a BOM
	bom  bool       // the input starts with a UTF-8 byte order mark
	data []byte     // current content, without the BOM
	docs []document // values: a Clone copies them in one block

	fileStyle *styleStats // indentation used in the whole file, computed when needed
}

// document is one editable "---" section of a file.
type document struct {
	start, end int // the section's bytes in File.data
	line       int // current file line of the section's first byte

	// origFirst and origLast are the file lines the section spans in the
	// parsed input; sepLine is the line of a "---" separator just before
	// it that belongs to no section, or 0. DocumentAt uses these, so
	// that positions reported for the original file stay valid.
	origFirst, origLast, sepLine int

	root *yaml.Node // the section's root node, for the current bytes
	// aliasLine is the section-relative line of the first alias, merge
	// key ("<<") or anchor, 0 if there is none.
	aliasLine int
	aliasWhat string
	// keyLine is the section-relative line of the first mapping key
	// that kubectl's YAML 1.1 decoder reads differently from YAML 1.2
	// ("y", "on", "1"), 0 if there is none.
	keyLine int
	keyWhat string
	// oddBreakLine is the section-relative line of the first line break
	// other than LF and CRLF (lone CR, NEL, LS, PS), 0 if there is none.
	oddBreakLine int
}

// Parse reads a YAML file. name is used in error messages and diffs. It
// fails on invalid YAML anywhere in the file (naming file:line), on files
// larger than MaxFileBytes and on input that is not UTF-8.
func Parse(name string, data []byte) (f *File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &Error{File: name, Msg: fmt.Sprintf("internal error (panic: %v)", r), Kind: ErrUnsupported}
		}
	}()
	if len(data) > MaxFileBytes {
		return nil, &Error{File: name, Kind: ErrTooLarge,
			Msg: fmt.Sprintf("file is %d bytes, larger than the %d MiB limit for editing", len(data), MaxFileBytes>>20)}
	}
	f = &File{name: name, orig: bytes.Clone(data)}
	body := data
	if bytes.HasPrefix(body, utf8BOM) {
		f.bom = true
		body = body[len(utf8BOM):]
	}
	if !utf8.Valid(body) {
		line := 1 + bytes.Count(body[:firstInvalidUTF8(body)], []byte("\n"))
		msg := "not valid UTF-8; only UTF-8 files can be edited"
		if bytes.HasPrefix(body, []byte{0xfe, 0xff}) || bytes.HasPrefix(body, []byte{0xff, 0xfe}) {
			msg = "UTF-16 files cannot be edited; convert the file to UTF-8"
			line = 0
		}
		return nil, &Error{File: name, Line: line, Msg: msg, Kind: ErrSyntax}
	}
	f.data = bytes.Clone(body)
	for _, sec := range splitSections(f.data) {
		if sec.badSeparator != "" {
			return nil, &Error{File: name, Line: sec.sepLine, Kind: ErrSyntax, Msg: fmt.Sprintf(
				"invalid document separator %q: only a comment may follow \"---\" on the same line", sec.badSeparator)}
		}
		root, err := parseSection(f.data[sec.start:sec.end])
		if err != nil {
			return nil, f.wrap(sec.line, err)
		}
		if root == nil {
			continue
		}
		d := document{
			start: sec.start, end: sec.end, line: sec.line,
			origFirst: sec.line, origLast: sec.lastLine, sepLine: sec.sepBefore,
		}
		d.setRoot(root, f.data[sec.start:sec.end])
		f.docs = append(f.docs, d)
	}
	return f, nil
}

// Clone returns a File with f's content and edits, to edit on its own: a
// parsed file can be cloned for every fix instead of parsed again. The
// clone shares the documents' node trees with f, which is safe because
// edits never change a node tree: an edited section is parsed into a new
// one (editor.apply).
func (f *File) Clone() *File {
	return &File{name: f.name, orig: f.orig, bom: f.bom, data: f.data, docs: slices.Clone(f.docs)}
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func (d *document) setRoot(root *yaml.Node, src []byte) {
	d.root = root
	d.aliasLine, d.aliasWhat = findAlias(root)
	d.oddBreakLine = findOddBreak(src)
	d.keyLine, d.keyWhat = 0, ""
	if d.aliasLine == 0 {
		d.keyLine, d.keyWhat = findAmbiguousKey(root, 0)
	}
}

// Name returns the name the file was parsed with.
func (f *File) Name() string { return f.name }

// Documents returns the number of documents in the file.
func (f *File) Documents() int { return len(f.docs) }

// DocumentAt returns the index of the document that contains the 1-based
// line, or that starts just after a "---" separator on that line. Lines are
// those of the file as it was parsed (manifest.Source lines), even after
// edits.
func (f *File) DocumentAt(line int) (int, error) {
	for i := range f.docs {
		d := &f.docs[i]
		if line >= d.origFirst && line <= d.origLast || line == d.sepLine {
			return i, nil
		}
	}
	return -1, &Error{File: f.name, Line: line, Kind: ErrNotFound, Msg: "no YAML document at this line"}
}

// Bytes returns the current content of the file.
func (f *File) Bytes() []byte {
	out := make([]byte, 0, len(f.data)+len(utf8BOM))
	if f.bom {
		out = append(out, utf8BOM...)
	}
	return append(out, f.data...)
}

// Content returns the current content of the file like Bytes, without
// copying it when it has no byte order mark: the bytes are f's, shared
// with its clones, and must not be changed. A fix of a file of thousands
// of documents keeps its content this way instead of a copy per fix.
func (f *File) Content() []byte {
	if f.bom {
		return f.Bytes()
	}
	return f.data
}

// Changed reports whether the content differs from the parsed input.
func (f *File) Changed() bool {
	orig := f.orig
	if f.bom {
		orig = orig[len(utf8BOM):]
	}
	return !bytes.Equal(f.data, orig)
}

// Diff returns a unified diff of the parsed input against the current
// content, empty when nothing changed.
func (f *File) Diff() string {
	if !f.Changed() {
		return ""
	}
	return unifiedDiff(f.name, f.orig, f.Bytes())
}

func unifiedDiff(name string, a, b []byte) string {
	return unidiff.Diff(diffLines(a), diffLines(b), "a/"+name, "b/"+name, 3)
}

// diffLines splits text into lines that keep their line breaks; a last line
// without one is marked the way diff(1) does.
func diffLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, string(b)+"\n\\ No newline at end of file\n")
			break
		}
		lines = append(lines, string(b[:i+1]))
		b = b[i+1:]
	}
	return lines
}

// doc returns document i or an error.
func (f *File) doc(i int) (*document, error) {
	if i < 0 || i >= len(f.docs) {
		return nil, &Error{File: f.name, Kind: ErrNotFound,
			Msg: fmt.Sprintf("no document %d (the file has %d)", i, len(f.docs))}
	}
	return &f.docs[i], nil
}

// wrap converts an error about a section starting at file line secLine into
// an *Error.
func (f *File) wrap(secLine int, err error) error {
	var ee *editError
	if errors.As(err, &ee) {
		line := secLine
		if ee.line > 0 {
			line = secLine + ee.line - 1
		}
		return &Error{File: f.name, Line: line, Msg: ee.msg, Kind: ee.kind}
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return &Error{File: f.name, Line: secLine, Msg: err.Error(), Kind: ErrUnsupported}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// parseSection parses one "---" section with yaml.v3. It returns a nil root
// for a section without a document.
func parseSection(src []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, errAt(0, ErrSyntax, "YAML parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlErr(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlErr(err)
	default:
		return nil, errAt(extra.Line, ErrSyntax,
			"a second YAML document starts here without a \"---\" line before it")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || isEmptyNull(doc.Content[0]) {
		// Nothing but "---", comments and blank lines.
		return nil, nil
	}
	return doc.Content[0], nil
}

func yamlErr(err error) *editError {
	msg := err.Error()
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else if len(msg) > 6 && msg[:6] == "yaml: " {
		msg = msg[6:]
	}
	return errAt(line, ErrSyntax, "invalid YAML: %s", msg)
}

// section is one "---"-separated part of a stream.
type section struct {
	start, end     int
	line, lastLine int
	sepBefore      int    // line of a separator just before the section that is part of no section
	badSeparator   string // a "---" line with more than a comment after it
	sepLine        int
}

// splitSections splits data exactly like k8s.io/apimachinery's YAMLReader
// (and the manifest package): at lines starting with "---". A separator that
// would end an empty section is kept as the first line of the next one, so
// that line numbers and document boundaries match what manifest reports.
func splitSections(data []byte) []section {
	var out []section
	pos, line := 0, 1
	start, startLine, sepBefore := 0, 1, 0
	for pos < len(data) {
		lineStart, lineEnd := pos, len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			lineEnd = pos + i
			pos = lineEnd + 1
		} else {
			pos = lineEnd
		}
		lineNo := line
		line++
		l := data[lineStart:lineEnd]
		if !bytes.HasPrefix(l, []byte("---")) {
			continue
		}
		if rest := bytes.TrimSpace(l[3:]); len(rest) > 0 && rest[0] != '#' {
			out = append(out, section{badSeparator: string(l), sepLine: lineNo})
			return out
		}
		if lineStart == start {
			continue
		}
		out = append(out, section{start: start, end: lineStart, line: startLine, lastLine: lineNo - 1, sepBefore: sepBefore})
		start, startLine, sepBefore = pos, line, lineNo
	}
	last := line - 1
	if last < startLine {
		last = startLine
	}
	out = append(out, section{start: start, end: len(data), line: startLine, lastLine: last, sepBefore: sepBefore})
	return out
}

// findAlias returns the line and a description of the first alias, anchor
// or merge key under n.
func findAlias(n *yaml.Node) (int, string) {
	if n == nil {
		return 0, ""
	}
	switch {
	case n.Kind == yaml.AliasNode:
		return n.Line, "alias *" + n.Value
	case n.Anchor != "":
		return n.Line, "anchor &" + n.Anchor
	case n.Kind == yaml.ScalarNode && n.Tag == "!!merge":
		return n.Line, "merge key <<"
	}
	for _, c := range n.Content {
		if l, w := findAlias(c); l > 0 {
			return l, w
		}
	}
	return 0, ""
}

// findAmbiguousKey returns the line and text of the first mapping key under
// n that is not the same string to yaml.v3 and to kubectl's decoder. Edits
// address keys by their text and are verified with both decoders, so such
// documents cannot be edited reliably.
func findAmbiguousKey(n *yaml.Node, depth int) (int, string) {
	if n == nil || depth > 10000 {
		return 0, ""
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; !plainKeyOK(k) {
				return k.Line, k.Value
			}
		}
	}
	for _, c := range n.Content {
		if l, w := findAmbiguousKey(c, depth+1); l > 0 {
			return l, w
		}
	}
	return 0, ""
}

// yaml11Words are the plain scalars YAML 1.1 reads as booleans or null.
var yaml11Words = map[string]bool{
	"y": true, "yes": true, "n": true, "no": true, "true": true, "false": true,
	"on": true, "off": true, "null": true,
}

func plainKeyOK(k *yaml.Node) bool {
	if k.Kind != yaml.ScalarNode {
		return false
	}
	if k.ShortTag() != "!!str" {
		return false
	}
	if k.Style != 0 {
		return true // quoted, or tagged !!str: a string to both
	}
	v := k.Value
	if v == "" || (!strings.ContainsRune("0123456789+-.~<=", rune(v[0])) && !yaml11Words[strings.ToLower(v)]) {
		return true
	}
	return roundTrips(v, v, false, true)
}

// findOddBreak returns the 1-based line of the first line break other than
// LF or CRLF, which YAML parsers count as line breaks but line-based edits
// would not.
func findOddBreak(src []byte) int {
	for i := 0; i < len(src); i++ {
		switch {
		case src[i] == '\r' && (i+1 >= len(src) || src[i+1] != '\n'):
		case src[i] == 0xC2 && i+1 < len(src) && src[i+1] == 0x85:
		case src[i] == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && (src[i+2] == 0xA8 || src[i+2] == 0xA9):
		default:
			continue
		}
		return 1 + bytes.Count(src[:i], []byte("\n"))
	}
	return 0
}
