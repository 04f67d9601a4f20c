package yamledit

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Get returns the value at pointer in document doc, decoded as kubectl
// decodes it (numbers are int64 or float64), and whether it exists.
func (f *File) Get(doc int, pointer string) (v any, found bool, err error) {
	defer f.recoverTo(&err)
	d, err := f.doc(doc)
	if err != nil {
		return nil, false, err
	}
	toks, err := parsePointer(pointer)
	if err != nil {
		return nil, false, &Error{File: f.name, Line: d.line, Msg: err.Error(), Kind: ErrInvalid}
	}
	if err := f.checkEditable(d, false); err != nil {
		return nil, false, err
	}
	data, err := kubectlView(f.data[d.start:d.end])
	if err != nil {
		return nil, false, f.wrap(d.line, err)
	}
	v, found = dataGet(data, toks)
	return v, found, nil
}

// Set sets the value at pointer in document doc, changing only the bytes
// that must change.
//
// value must be JSON-compatible: string, bool, an integer, float64, nil,
// []any or map[string]any. Missing parent mappings are created (a null
// counts as missing); a "-" token appends to a list (or, where the parent is
// missing, creates one); any other list index must exist. Strings keep the
// quoting style of the value they replace when it can represent them, and
// are quoted when they would otherwise read back as something else (a
// number, a boolean, null, a timestamp). Maps and lists are merged into
// existing ones entry by entry, so that untouched entries keep their text;
// new ones are written in block style, keys sorted, at the indentation the
// document uses.
//
// The edited document is then decoded again, both as kubectl decodes it
// and with YAML 1.2, and must equal the original data with the change
// applied; otherwise Set returns an ErrUnsupported error and leaves the
// file unchanged.
func (f *File) Set(doc int, pointer string, value any) (err error) {
	defer f.recoverTo(&err)
	v, err := normalizeValue(value, 0)
	if err != nil {
		return &Error{File: f.name, Msg: fmt.Sprintf("cannot set %s: %v", pointer, err), Kind: ErrInvalid}
	}
	return f.edit(doc, pointer, func(e *editor, toks []string) error {
		return e.set(toks, v)
	}, func(data any, toks []string) (any, error) {
		return dataSet(data, toks, v)
	})
}

// Remove deletes the mapping entry or list item at pointer in document doc:
// the lines holding it, including the lines of its value and the comments
// on them; comments above it stay. Removing the last entry of a block
// mapping or list leaves "{}" or "[]". Like Set, the result is verified.
func (f *File) Remove(doc int, pointer string) (err error) {
	defer f.recoverTo(&err)
	return f.edit(doc, pointer, func(e *editor, toks []string) error {
		return e.remove(toks)
	}, dataRemove)
}

func (f *File) recoverTo(err *error) {
	if r := recover(); r != nil {
		*err = &Error{File: f.name, Msg: fmt.Sprintf("internal error (panic: %v)", r), Kind: ErrUnsupported}
	}
}

// checkEditable refuses documents that line-based edits cannot handle
// safely.
func (f *File) checkEditable(d *document, edit bool) error {
	if d.aliasLine > 0 {
		return &Error{File: f.name, Line: d.line + d.aliasLine - 1, Kind: ErrUnsupported, Msg: fmt.Sprintf(
			"document uses YAML anchors, aliases or merge keys (%s); yamledit does not read or edit such documents", d.aliasWhat)}
	}
	if edit && d.keyLine > 0 {
		return &Error{File: f.name, Line: d.line + d.keyLine - 1, Kind: ErrUnsupported, Msg: fmt.Sprintf(
			"mapping key %q is read differently by kubectl (YAML 1.1) and YAML 1.2; quote it to make the document editable", d.keyWhat)}
	}
	if edit && d.oddBreakLine > 0 {
		return &Error{File: f.name, Line: d.line + d.oddBreakLine - 1, Kind: ErrUnsupported,
			Msg: "document contains a line break other than LF or CRLF (a lone CR, NEL, LS or PS); refusing to edit it"}
	}
	return nil
}

// edit runs op on a copy of document doc's section, verifies the result
// against expect applied to the decoded original and commits it.
func (f *File) edit(doc int, pointer string, op func(*editor, []string) error, expect func(any, []string) (any, error)) error {
	d, err := f.doc(doc)
	if err != nil {
		return err
	}
	toks, err := parsePointer(pointer)
	if err != nil {
		return &Error{File: f.name, Line: d.line, Msg: err.Error(), Kind: ErrInvalid}
	}
	if err := f.checkEditable(d, true); err != nil {
		return err
	}
	src := bytes.Clone(f.data[d.start:d.end])
	before, err := kubectlView(src)
	if err != nil {
		return f.wrap(d.line, err)
	}
	before12, err := yaml12View(d.root)
	if err != nil {
		return f.wrap(d.line, err)
	}
	style := f.style(d)
	attempt := func(src []byte, root *yaml.Node) (*editor, error) {
		e := &editor{t: newText(src), root: root, r: style,
			json: strings.HasSuffix(strings.ToLower(f.name), ".json")}
		return e, op(e, toks)
	}
	e, err := attempt(src, d.root)
	if err != nil {
		return f.wrap(d.line, err)
	}
	if bytes.Equal(e.t.src, src) {
		return nil
	}
	want, err := expect(before, toks)
	if err != nil {
		return &Error{File: f.name, Line: d.line, Kind: ErrInvalid, Msg: err.Error()}
	}
	want12, err := expect(before12, toks)
	if err != nil {
		return &Error{File: f.name, Line: d.line, Kind: ErrInvalid, Msg: err.Error()}
	}
	verr := verify(src, e, want, want12)
	if verr != nil && !bytes.HasSuffix(src, []byte("\n")) {
		// The file does not end with a line break, which a block scalar
		// written or kept on the last line may need: try again with one,
		// and keep it only if the data requires it.
		src2 := append(bytes.Clone(src), style.eol...)
		if root2, err := parseSection(src2); err == nil && root2 != nil {
			if e2, err := attempt(src2, root2); err == nil && verify(src2, e2, want, want12) == nil {
				e, verr = e2, nil
				trimmed := bytes.TrimSuffix(e2.t.src, []byte(style.eol))
				if root3, err := parseSection(trimmed); err == nil && root3 != nil {
					e3 := &editor{t: newText(trimmed), root: root3}
					if verify(src, e3, want, want12) == nil {
						e = e3
					}
				}
			}
		}
	}
	if verr != nil {
		return f.wrap(d.line, verr)
	}
	f.commit(doc, e)
	return nil
}

// verify checks an edited section: it must still be exactly one document
// and decode to the wanted data with both decoders.
func verify(orig []byte, e *editor, want, want12 any) error {
	src := e.t.src
	fail := func(format string, args ...any) error {
		return errAt(0, ErrUnsupported, "refusing edit, the result would be wrong: %s (this is a bug in yamledit)", fmt.Sprintf(format, args...))
	}
	for _, l := range e.t.lines[1:] {
		if l < len(src) && bytes.HasPrefix(src[l:], []byte("---")) {
			return fail("a line would start with \"---\"")
		}
	}
	if bytes.HasSuffix(orig, []byte("\n")) && !bytes.HasSuffix(src, []byte("\n")) {
		// The next "---" would no longer start a line.
		return fail("the document would lose its final line break")
	}
	got, err := kubectlView(src)
	if err != nil {
		return fail("%v", err)
	}
	if !equalData(got, want) {
		return fail("the document would decode to different data")
	}
	got12, err := yaml12View(e.root)
	if err != nil {
		return fail("%v", err)
	}
	if !equalData(got12, want12) {
		return fail("the document would decode to different YAML 1.2 data")
	}
	return nil
}

// commit replaces document doc's section with the editor's text.
func (f *File) commit(doc int, e *editor) {
	d := &f.docs[doc]
	old := f.data[d.start:d.end]
	delta := len(e.t.src) - len(old)
	lineDelta := bytes.Count(e.t.src, []byte("\n")) - bytes.Count(old, []byte("\n"))
	data := make([]byte, 0, len(f.data)+delta)
	data = append(data, f.data[:d.start]...)
	data = append(data, e.t.src...)
	data = append(data, f.data[d.end:]...)
	f.data = data
	d.end += delta
	d.setRoot(e.root, e.t.src)
	for i := range f.docs[doc+1:] {
		o := &f.docs[doc+1+i]
		o.start += delta
		o.end += delta
		o.line += lineDelta
	}
}

// style returns the renderer for document d: indentation learned from the
// document, else from the whole file, else two spaces.
func (f *File) style(d *document) renderer {
	st := newStyleStats()
	st.add(newText(f.data[d.start:d.end]), d.root)
	if len(st.step) == 0 || len(st.seq) == 0 || st.lf == 0 {
		if f.fileStyle == nil {
			f.fileStyle = newStyleStats()
			for _, o := range f.docs {
				f.fileStyle.add(newText(f.data[o.start:o.end]), o.root)
			}
		}
		all := f.fileStyle
		if len(st.step) == 0 {
			st.step = all.step
		}
		if len(st.seq) == 0 {
			st.seq = all.seq
		}
		if len(st.gap) == 0 {
			st.gap = all.gap
		}
		if st.lf == 0 {
			st.crlf, st.lf = all.crlf, all.lf
		}
	}
	return st.renderer()
}

// kubectlView decodes a section as kubectl does (sigs.k8s.io/yaml, strict:
// duplicate keys are errors).
func kubectlView(src []byte) (any, error) {
	js, err := sigsyaml.YAMLToJSONStrict(src)
	if err != nil {
		return nil, errAt(0, ErrUnsupported, "cannot decode the document as kubectl does: %v", err)
	}
	v, err := decodeJSON(js)
	if err != nil {
		return nil, errAt(0, ErrUnsupported, "cannot decode the document: %v", err)
	}
	return v, nil
}

// yaml12View decodes a node tree with yaml.v3.
func yaml12View(root *yaml.Node) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errAt(0, ErrUnsupported, "cannot decode the document: %v", r)
		}
	}()
	if err := root.Decode(&v); err != nil {
		return nil, errAt(0, ErrUnsupported, "cannot decode the document: %v", err)
	}
	return v, nil
}

// editor edits one section, re-parsing it after every step.
type editor struct {
	t    *text
	root *yaml.Node
	r    renderer
	json bool // a .json file: flow collections are written as JSON
}

func (e *editor) jsonAt(l *loc) bool { return e.json || jsonStyle(l) }

// change is the replacement of src[from:to] by text.
type change struct {
	from, to int
	text     string
}

// apply makes non-overlapping changes and re-parses the section.
func (e *editor) apply(cs ...change) error {
	sort.Slice(cs, func(i, j int) bool { return cs[i].from > cs[j].from })
	src := e.t.src
	for _, c := range cs {
		if c.from < 0 || c.to < c.from || c.to > len(src) {
			return errAt(0, ErrUnsupported, "internal error: bad edit range")
		}
		var b []byte
		b = append(b, src[:c.from]...)
		b = append(b, c.text...)
		b = append(b, src[c.to:]...)
		src = b
	}
	root, err := parseSection(src)
	if err != nil {
		return errAt(0, ErrUnsupported, "refusing edit, the result would not parse: %s (this is a bug in yamledit)", err.Error())
	}
	if root == nil {
		return errAt(0, ErrUnsupported, "refusing edit, the result would be an empty document")
	}
	e.t, e.root = newText(src), root
	return nil
}

// find walks toks from the root. It returns the deepest existing node and
// the tokens that do not exist below it (empty if the whole path exists).
func (e *editor) find(toks []string) (*loc, []string, error) {
	l := &loc{n: e.root, indent: -1}
	for i, tok := range toks {
		n := l.n
		switch n.Kind {
		case yaml.MappingNode:
			found := -1
			for j := 0; j+1 < len(n.Content); j += 2 {
				k := n.Content[j]
				if k.Kind == yaml.ScalarNode && k.Value == tok {
					if found >= 0 {
						return nil, nil, errAt(k.Line, ErrUnsupported, "duplicate key %q", tok)
					}
					found = j
				}
			}
			if found < 0 {
				return l, toks[i:], nil
			}
			c, err := e.t.child(l, found)
			if err != nil {
				return nil, nil, err
			}
			l = c
		case yaml.SequenceNode:
			if tok == "-" {
				return l, toks[i:], nil
			}
			j := arrayIndex(tok)
			if j < 0 || j >= len(n.Content) {
				return nil, nil, errAt(n.Line, ErrInvalid, "%s: list index %q out of range (the list has %d items)",
					formatPointer(toks[:i+1]), tok, len(n.Content))
			}
			c, err := e.t.child(l, j)
			if err != nil {
				return nil, nil, err
			}
			l = c
		case yaml.ScalarNode:
			if isNull(n) {
				return l, toks[i:], nil
			}
			return nil, nil, errAt(n.Line, ErrInvalid, "%s is a scalar, it has no %q", formatPointer(toks[:i]), tok)
		default:
			return nil, nil, errAt(n.Line, ErrUnsupported, "cannot edit through YAML aliases")
		}
	}
	return l, nil, nil
}

func (e *editor) set(toks []string, v any) error {
	l, rest, err := e.find(toks)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return e.setNode(l, v)
	}
	switch n := l.n; {
	case isNull(n):
		return e.replace(l, build(rest, v))
	case n.Kind == yaml.MappingNode:
		return e.insertKey(l, rest[0], build(rest[1:], v))
	case n.Kind == yaml.SequenceNode && rest[0] == "-":
		return e.appendItem(l, build(rest[1:], v))
	}
	return errAt(l.n.Line, ErrInvalid, "cannot set %s", formatPointer(toks))
}

// setNode gives the existing node at l the value v, merging collections.
func (e *editor) setNode(l *loc, v any) error {
	n := l.n
	cur, err := yaml12View(n)
	if err == nil && equalData(cur, v) && n.Kind != yaml.AliasNode {
		return nil
	}
	toks := l.toks
	switch x := v.(type) {
	case map[string]any:
		if n.Kind != yaml.MappingNode || len(x) == 0 || len(n.Content) == 0 {
			break
		}
		for _, k := range sortedKeys(x) {
			if err := e.set(subToks(toks, k), x[k]); err != nil {
				return err
			}
		}
		for {
			l, _, err := e.find(toks)
			if err != nil {
				return err
			}
			extra := ""
			for j := 0; j+1 < len(l.n.Content); j += 2 {
				if _, ok := x[l.n.Content[j].Value]; !ok {
					extra = l.n.Content[j].Value
					break
				}
			}
			if extra == "" {
				return nil
			}
			if err := e.remove(subToks(toks, extra)); err != nil {
				return err
			}
		}
	case []any:
		if n.Kind != yaml.SequenceNode || len(x) == 0 || len(n.Content) == 0 {
			break
		}
		have := len(n.Content)
		for i, item := range x {
			t := "-"
			if i < have {
				t = itoa(i)
			}
			if err := e.set(subToks(toks, t), item); err != nil {
				return err
			}
		}
		for i := have - 1; i >= len(x); i-- {
			if err := e.remove(subToks(toks, itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}
	return e.replace(l, v)
}

// jsonStyle reports whether the flow collection around l is written as
// JSON (double-quoted keys), so new text must be JSON too.
func jsonStyle(l *loc) bool {
	var outer *loc
	for p := l; p != nil; p = p.parent {
		if isFlow(p.n) {
			outer = p
		}
	}
	if outer == nil {
		return false
	}
	json := false
	var walk func(n *yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Style&^yaml.TaggedStyle != yaml.DoubleQuotedStyle {
					return false
				}
				json = true
				if !walk(n.Content[i+1]) {
					return false
				}
			}
		}
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if !walk(c) {
					return false
				}
			}
		}
		return true
	}
	return walk(outer.n) && json
}

// siblingStyle returns the styles of the last entry of the collection c,
// which new entries copy when they are quoted.
func siblingStyle(c *yaml.Node) entryStyle {
	var st entryStyle
	if len(c.Content) == 0 {
		return st
	}
	var k, v *yaml.Node
	if c.Kind == yaml.MappingNode && len(c.Content) >= 2 {
		k, v = c.Content[len(c.Content)-2], c.Content[len(c.Content)-1]
	} else if c.Kind == yaml.SequenceNode {
		v = c.Content[len(c.Content)-1]
	}
	quoted := func(n *yaml.Node) yaml.Style {
		if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			return 0
		}
		if s := n.Style &^ yaml.TaggedStyle; s == yaml.DoubleQuotedStyle || s == yaml.SingleQuotedStyle {
			return s
		}
		return 0
	}
	st.key, st.value = quoted(k), quoted(v)
	return st
}

// contentIndent is where the lines of a new block scalar at l go.
func (e *editor) contentIndent(l *loc) int {
	return max(l.indent+e.r.step, 1)
}

// replace writes v in place of the node at l.
func (e *editor) replace(l *loc, v any) error {
	t := e.t
	n := l.n
	start := t.nodeStart(n)
	end, err := t.nodeEnd(l)
	if err != nil {
		return err
	}
	style := n.Style
	if n.Kind != yaml.ScalarNode {
		style = 0
	}
	if l.flow {
		return e.apply(change{start, end, e.r.flow(v, e.jsonAt(l), entryStyle{value: style})})
	}
	if isCollection(v) && isFlow(n) && (len(n.Content) > 0 || l.isRoot()) {
		// Flow stays flow; a document that is one flow collection (a
		// JSON file) stays one.
		return e.apply(change{start, end, e.r.flow(v, e.jsonAt(l), entryStyle{})})
	}
	ind := -1
	if !l.isRoot() {
		if ind, err = t.indicatorEnd(l); err != nil {
			return err
		}
	}
	onIndLine := l.isRoot() || t.lineOf(start) == t.lineOf(ind)

	if !isCollection(v) {
		ci := e.contentIndent(l)
		var bi blockInfo
		oldBlock := false
		if s := style &^ yaml.TaggedStyle; n.Kind == yaml.ScalarNode && (s == yaml.LiteralStyle || s == yaml.FoldedStyle) {
			c, _ := t.skipProps(start, false)
			if b, berr := t.blockScalar(c, l.indent); berr == nil && b.hasContent {
				bi, oldBlock = b, true
				ci = b.contentIndent
			}
		}
		txt := e.r.scalar(v, scalarOpts{style: style, indent: ci})
		multi := strings.Contains(txt, "\n")
		if s, ok := v.(string); ok && multi && strings.HasSuffix(s, "\n") && t.nextLine(end) == len(t.src) && !bytes.HasSuffix(t.src, []byte("\n")) {
			// A block scalar's last line break would be missing at the
			// end of a file without one.
			txt, multi = doubleQuote(s), false
		}
		if oldBlock && multi && n.Style&yaml.TaggedStyle == 0 && n.Anchor == "" {
			// Block scalar for block scalar: keep the header's comment.
			hdr, body, _ := strings.Cut(txt, e.r.eol)
			c, _ := t.skipProps(start, false)
			return e.apply(change{c, bi.headerEnd, hdr}, change{bi.contentStart, bi.end, body})
		}
		a, prefix, comment := start, "", ""
		if !onIndLine {
			a = ind
			prefix = " "
			if c, ok := t.trailingComment(ind); ok && c != "" && t.lineOf(ind) < t.lineOf(start) {
				comment = c
			}
		} else if start == ind {
			prefix = " "
		}
		return e.finish(a, end, prefix+txt, comment)
	}

	sameKind := (n.Kind == yaml.MappingNode && isMap(v)) || (n.Kind == yaml.SequenceNode && !isMap(v))
	switch {
	case l.isRoot() || (onIndLine && l.inBlockSequence()):
		col, prefix := t.col(start), ""
		if start == ind {
			// "-" with nothing after it.
			col, prefix = col+e.r.gap-1, spaces(e.r.gap-1)
		}
		return e.finish(start, end, prefix+e.r.block(v, col, l.toks, entryStyle{}), "")
	case !onIndLine:
		col := t.col(start)
		if !sameKind || n.Kind == yaml.ScalarNode || n.Anchor != "" || n.Style&yaml.TaggedStyle != 0 {
			col = e.childCol(l, v)
		}
		return e.finish(t.lineStart(start), end, spaces(col)+e.r.block(v, col, l.toks, entryStyle{}), "")
	default:
		// "key: scalar" becomes "key:" and indented lines.
		col := e.childCol(l, v)
		return e.finish(ind, end, e.r.eol+spaces(col)+e.r.block(v, col, l.toks, entryStyle{}), "")
	}
}

// finish replaces src[a:b] with txt and puts comment at the end of txt's
// first line. When txt spans lines, a comment after b on its line moves
// there too: left in place it would follow txt's last line, which may be
// inside a block scalar.
func (e *editor) finish(a, b int, txt, comment string) error {
	if strings.Contains(txt, "\n") {
		if c, ok := e.t.trailingComment(b); ok && c != "" {
			if comment != "" {
				comment += " "
			}
			comment += c
			b = e.t.lineEnd(b)
		}
	}
	return e.apply(change{a, b, withComment(txt, comment, e.r.eol)})
}

func isMap(v any) bool { _, ok := v.(map[string]any); return ok }

// childCol is the column for a new block collection v as the value at l.
func (e *editor) childCol(l *loc, v any) int {
	base := max(l.indent, 0)
	if l.isRoot() {
		return 0
	}
	if l.parent.n.Kind == yaml.SequenceNode {
		return l.indent + e.r.gap
	}
	if isMap(v) {
		return base + e.r.step
	}
	return base + e.r.seqIndent
}

// withComment puts a comment at the end of the first line of txt.
func withComment(txt, comment, eol string) string {
	if comment == "" {
		return txt
	}
	first, rest, found := strings.Cut(txt, eol)
	if first == "" {
		first = " " + comment
	} else {
		first += " " + comment
	}
	if !found {
		return first
	}
	return first + eol + rest
}

// insertLines inserts whole lines (txt, without a final line break) after
// the line holding offset p.
func (e *editor) insertLines(p int, txt string) error {
	t := e.t
	q := t.nextLine(p)
	if q == len(t.src) && (len(t.src) == 0 || t.src[len(t.src)-1] != '\n') {
		cs := []change{{q, q, e.r.eol + txt}}
		// A block scalar on the last line of a file without a final line
		// break has no final line break in its value either; with lines
		// after it, it needs "-" (strip) to keep it that way.
		n := e.root
		for len(n.Content) > 0 {
			n = n.Content[len(n.Content)-1]
		}
		if st := n.Style &^ yaml.TaggedStyle; n.Kind == yaml.ScalarNode && (st == yaml.LiteralStyle || st == yaml.FoldedStyle) &&
			!strings.HasSuffix(n.Value, "\n") {
			p, _ := t.skipProps(t.nodeStart(n), false)
			h := p + 1
			for h < len(t.src) && strings.IndexByte("123456789", t.src[h]) >= 0 {
				h++
			}
			if h < len(t.src) && t.src[h] != '-' && t.src[h] != '+' && p < len(t.src) && (t.src[p] == '|' || t.src[p] == '>') {
				cs = append(cs, change{p + 1, p + 1, "-"})
			}
		}
		return e.apply(cs...)
	}
	return e.apply(change{q, q, txt + e.r.eol})
}

// insertKey adds key: v to the mapping at l, which does not have key.
func (e *editor) insertKey(l *loc, key string, v any) error {
	t := e.t
	n := l.n
	if len(n.Content) == 0 {
		return e.replace(l, map[string]any{key: v})
	}
	last, err := t.child(l, len(n.Content)-2)
	if err != nil {
		return err
	}
	p, err := t.nodeEnd(last)
	if err != nil {
		return err
	}
	st := siblingStyle(n)
	firstKey := n.Content[0]
	if isFlow(n) {
		json := e.jsonAt(l)
		entry := e.r.flowEntry(key, v, json, st)
		lastKey := n.Content[len(n.Content)-2]
		if lastKey.Line != n.Line && t.onlySpaceBefore(t.nodeStart(lastKey)) {
			return e.apply(change{p, p, "," + e.r.eol + spaces(t.col(t.nodeStart(lastKey))) + entry})
		}
		return e.apply(change{p, p, ", " + entry})
	}
	col := firstKey.Column - 1
	return e.insertLines(p, spaces(col)+e.r.entry(key, v, col, subToks(l.toks, key), st))
}

// appendItem adds v at the end of the list at l.
func (e *editor) appendItem(l *loc, v any) error {
	t := e.t
	n := l.n
	if len(n.Content) == 0 {
		return e.replace(l, []any{v})
	}
	last, err := t.child(l, len(n.Content)-1)
	if err != nil {
		return err
	}
	p, err := t.nodeEnd(last)
	if err != nil {
		return err
	}
	st := siblingStyle(n)
	if isFlow(n) {
		txt := e.r.flow(v, e.jsonAt(l), st)
		lastItem := n.Content[len(n.Content)-1]
		if lastItem.Line != n.Line && t.onlySpaceBefore(t.nodeStart(lastItem)) {
			return e.apply(change{p, p, "," + e.r.eol + spaces(t.col(t.nodeStart(lastItem))) + txt})
		}
		return e.apply(change{p, p, ", " + txt})
	}
	first := n.Content[0]
	fs := t.nodeStart(first)
	dash, err := t.dashBefore(fs)
	if err != nil {
		return err
	}
	dcol := t.col(dash)
	r := e.r
	if t.lineOf(fs) == t.lineOf(dash) && first.Kind == yaml.MappingNode && !isEmptyNull(first) {
		if g := t.col(fs) - dcol; g >= 2 {
			r.gap = g
		}
	}
	return e.insertLines(p, spaces(dcol)+r.item(v, dcol, subToks(l.toks, "-"), st))
}

// remove deletes the entry at toks.
func (e *editor) remove(toks []string) error {
	if len(toks) == 0 {
		return errAt(0, ErrInvalid, "cannot remove the whole document")
	}
	l, rest, err := e.find(toks)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return errAt(l.n.Line, ErrNotFound, "%s does not exist", formatPointer(toks))
	}
	t := e.t
	p := l.parent
	pn := p.n
	// entryStart is where the entry at index i of the parent starts: its
	// key, or its "-" in a block sequence.
	entryStart := func(i int) (int, error) {
		if pn.Kind == yaml.MappingNode {
			return t.nodeStart(pn.Content[i]), nil
		}
		s := t.nodeStart(pn.Content[i])
		if isFlow(pn) {
			return s, nil
		}
		return t.dashBefore(s)
	}
	step := 1
	if pn.Kind == yaml.MappingNode {
		step = 2
	}
	count := len(pn.Content) / step
	pos := l.idx / step
	if count == 1 {
		if pn.Kind == yaml.MappingNode {
			return e.replace(p, map[string]any{})
		}
		return e.replace(p, []any{})
	}
	start, err := entryStart(l.idx)
	if err != nil {
		return err
	}
	end, err := t.nodeEnd(l)
	if err != nil {
		return err
	}
	if isFlow(pn) {
		if pos+1 < count {
			next, err := entryStart(l.idx + step)
			if err != nil {
				return err
			}
			return e.apply(change{start, next, ""})
		}
		prev, err := t.child(p, l.idx-step)
		if err != nil {
			return err
		}
		pe, err := t.nodeEnd(prev)
		if err != nil {
			return err
		}
		return e.apply(change{pe, end, ""})
	}
	if t.onlySpaceBefore(start) {
		a, b := t.lineStart(start), t.nextLine(end)
		if _, ok := t.trailingComment(end); !ok {
			return errAt(l.n.Line, ErrUnsupported, "unexpected text after %s", formatPointer(toks))
		}
		if b == len(t.src) && (len(t.src) == 0 || t.src[len(t.src)-1] != '\n') && a > 0 {
			// The last line has no line break: remove the one before it.
			// (If the line before needs it, verification fails and the
			// edit is retried with a line break added at the end.)
			a--
			if a > 0 && t.src[a-1] == '\r' {
				a--
			}
		}
		return e.apply(change{a, b, ""})
	}
	if pos+1 < count {
		next, err := entryStart(l.idx + step)
		if err != nil {
			return err
		}
		return e.apply(change{start, next, ""})
	}
	return errAt(l.n.Line, ErrUnsupported, "cannot remove %s without rewriting its neighbours", formatPointer(toks))
}
