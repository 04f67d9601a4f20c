package yamledit

import (
	"bytes"
	"sort"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// text is the source of one section with a line index. yaml.v3 reports the
// start of every node as a line and a column counted in characters; text
// turns those into byte offsets, and finds where nodes end, which yaml.v3
// does not report, by scanning the source from the start of the node.
type text struct {
	src   []byte
	lines []int // byte offset of the start of every line
}

func newText(src []byte) *text {
	t := &text{src: src, lines: []int{0}}
	for i, c := range src {
		if c == '\n' {
			t.lines = append(t.lines, i+1)
		}
	}
	return t
}

// off converts a 1-based line and character column into a byte offset.
func (t *text) off(line, col int) int {
	if line < 1 {
		return 0
	}
	if line > len(t.lines) {
		return len(t.src)
	}
	i := t.lines[line-1]
	for c := 1; c < col && i < len(t.src) && t.src[i] != '\n'; c++ {
		_, n := utf8.DecodeRune(t.src[i:])
		i += n
	}
	return i
}

// lineOf returns the 1-based line of a byte offset.
func (t *text) lineOf(off int) int {
	return sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > off })
}

func (t *text) lineStart(off int) int { return t.lines[t.lineOf(off)-1] }

// lineEnd returns the offset of the line break ending off's line (its CR in
// a CRLF), or len(src).
func (t *text) lineEnd(off int) int {
	i := bytes.IndexByte(t.src[off:], '\n')
	if i < 0 {
		return len(t.src)
	}
	e := off + i
	if e > 0 && t.src[e-1] == '\r' && e-1 >= off {
		e--
	}
	return e
}

// nextLine returns the offset just after the line break ending off's line,
// or len(src) if that line has no line break.
func (t *text) nextLine(off int) int {
	i := bytes.IndexByte(t.src[off:], '\n')
	if i < 0 {
		return len(t.src)
	}
	return off + i + 1
}

// col returns the 0-based column of off in characters.
func (t *text) col(off int) int {
	return utf8.RuneCount(t.src[t.lineStart(off):off])
}

// onlySpaceBefore reports whether only blanks precede off on its line.
func (t *text) onlySpaceBefore(off int) bool {
	for i := t.lineStart(off); i < off; i++ {
		if t.src[i] != ' ' && t.src[i] != '\t' {
			return false
		}
	}
	return true
}

// trailingComment returns the comment following off on its line, if the
// rest of the line is only blanks and a comment, and whether the rest of
// the line is blank or a comment.
func (t *text) trailingComment(off int) (string, bool) {
	rest := strings.TrimLeft(string(t.src[off:t.lineEnd(off)]), " \t")
	if rest == "" {
		return "", true
	}
	if rest[0] == '#' && off < len(t.src) && (t.src[off] == ' ' || t.src[off] == '\t') {
		return strings.TrimRight(rest, " \t"), true
	}
	return "", false
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func isFlowIndicator(c byte) bool {
	return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}

// atEOL reports whether offset i is at the end of a line or of the text.
func (t *text) atEOL(i int) bool {
	return i >= len(t.src) || t.src[i] == '\n' || (t.src[i] == '\r' && i+1 < len(t.src) && t.src[i+1] == '\n')
}

// loc is a node together with how it is reached.
type loc struct {
	n      *yaml.Node
	parent *loc
	idx    int  // index in parent.n.Content (of the key, for mappings)
	flow   bool // n is inside a flow collection
	// indent is the column of the innermost block collection containing
	// n (the mapping's keys, the sequence's dashes), -1 at the root.
	indent int
	toks   []string
}

func (l *loc) isRoot() bool { return l.parent == nil }

func (l *loc) inBlockSequence() bool {
	return l.parent != nil && !l.flow && l.parent.n.Kind == yaml.SequenceNode
}

func isFlow(n *yaml.Node) bool {
	return (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle != 0
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// isEmptyNull reports a null written as nothing at all ("key:" or "-").
func isEmptyNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "" && n.Style&^yaml.TaggedStyle == 0 && n.Tag == "!!null"
}

func subToks(toks []string, t string) []string {
	out := make([]string, len(toks), len(toks)+1)
	copy(out, toks)
	return append(out, t)
}

// child returns the loc of parent.n.Content[i] (for a mapping, i is the
// index of the key and the loc is that of the value).
func (t *text) child(p *loc, i int) (*loc, error) {
	c := &loc{parent: p, idx: i, flow: p.flow || isFlow(p.n), indent: p.indent}
	switch p.n.Kind {
	case yaml.MappingNode:
		c.n = p.n.Content[i+1]
		c.toks = subToks(p.toks, p.n.Content[i].Value)
		if !c.flow {
			c.indent = p.n.Content[0].Column - 1
		}
	case yaml.SequenceNode:
		c.n = p.n.Content[i]
		c.toks = subToks(p.toks, itoa(i))
		if !c.flow {
			d, err := t.dashBefore(t.nodeStart(p.n.Content[0]))
			if err != nil {
				return nil, err
			}
			c.indent = t.col(d)
		}
	}
	return c, nil
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	if i == 0 {
		return "0"
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}

// nodeStart returns the offset of the first character of n, including its
// tag and anchor. For a null written as nothing, it is the offset just
// after the ":" or "-" before it.
func (t *text) nodeStart(n *yaml.Node) int { return t.off(n.Line, n.Column) }

// skipProps skips the tag and anchor at p and the blanks, line breaks and
// comments after them. It returns where the content starts and where the
// last property ends (p if there are none).
func (t *text) skipProps(p int, flow bool) (content, propsEnd int) {
	propsEnd = p
	i := p
	for i < len(t.src) && (t.src[i] == '!' || t.src[i] == '&') {
		for i < len(t.src) && !isBlank(t.src[i]) && t.src[i] != '\n' && t.src[i] != '\r' &&
			!(flow && isFlowIndicator(t.src[i])) {
			i++
		}
		propsEnd = i
		i = t.skipSpace(i)
	}
	return i, propsEnd
}

// skipSpace skips blanks, line breaks and comments.
func (t *text) skipSpace(i int) int {
	for i < len(t.src) {
		switch c := t.src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' && (i == 0 || isBlank(t.src[i-1]) || t.src[i-1] == '\n' || t.src[i-1] == '\r'):
			i = t.lineEnd(i)
		default:
			return i
		}
	}
	return i
}

// nodeEnd returns the offset just after the last character of the node at l.
func (t *text) nodeEnd(l *loc) (int, error) {
	n := l.n
	start := t.nodeStart(n)
	switch n.Kind {
	case yaml.ScalarNode:
		return t.scalarEnd(n, start, l.flow, l.indent)
	case yaml.AliasNode:
		i := start + 1
		for i < len(t.src) && !isBlank(t.src[i]) && !t.atEOL(i) && !(l.flow && isFlowIndicator(t.src[i])) {
			i++
		}
		return i, nil
	case yaml.MappingNode, yaml.SequenceNode:
		if isFlow(n) {
			c, _ := t.skipProps(start, l.flow)
			return t.flowEnd(c)
		}
		if len(n.Content) == 0 {
			return 0, errAt(n.Line, ErrUnsupported, "empty block collection")
		}
		last := len(n.Content) - 1
		if n.Kind == yaml.MappingNode {
			last--
		}
		c, err := t.child(l, last)
		if err != nil {
			return 0, err
		}
		return t.nodeEnd(c)
	}
	return 0, errAt(n.Line, ErrUnsupported, "unexpected YAML node")
}

// scalarEnd finds the end of the scalar n starting at start.
func (t *text) scalarEnd(n *yaml.Node, start int, flow bool, indent int) (int, error) {
	p, propsEnd := start, start
	if n.Style&yaml.TaggedStyle != 0 || n.Anchor != "" || (start < len(t.src) && (t.src[start] == '!' || t.src[start] == '&')) {
		p, propsEnd = t.skipProps(start, flow)
	}
	style := n.Style &^ yaml.TaggedStyle
	if n.Value == "" && style == 0 {
		return propsEnd, nil
	}
	fail := func(what string) (int, error) {
		return 0, errAt(n.Line, ErrUnsupported, "cannot find the end of the %s scalar starting here", what)
	}
	switch style {
	case yaml.DoubleQuotedStyle:
		if p >= len(t.src) || t.src[p] != '"' {
			return fail("double-quoted")
		}
		for i := p + 1; i < len(t.src); i++ {
			switch t.src[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
		return fail("double-quoted")
	case yaml.SingleQuotedStyle:
		if p >= len(t.src) || t.src[p] != '\'' {
			return fail("single-quoted")
		}
		for i := p + 1; i < len(t.src); i++ {
			if t.src[i] == '\'' {
				if i+1 < len(t.src) && t.src[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
		return fail("single-quoted")
	case yaml.LiteralStyle, yaml.FoldedStyle:
		b, err := t.blockScalar(p, indent)
		if err != nil {
			return 0, errAt(n.Line, ErrUnsupported, "%s", err.msg)
		}
		return b.end, nil
	}
	if e, ok := t.plainEnd(p, flow, indent, n.Value); ok {
		return e, nil
	}
	return fail("plain")
}

// plainLineEnd scans a plain scalar's text on one line from i. It returns
// the end of its last non-blank character and whether something other than
// the end of the line (a comment, ": ", a flow indicator) ended it.
func (t *text) plainLineEnd(i int, flow bool) (int, bool) {
	from, last := i, i
	for ; !t.atEOL(i); i++ {
		c := t.src[i]
		switch {
		case c == '#' && i > from && isBlank(t.src[i-1]):
			return last, true
		case c == ':' && (i+1 >= len(t.src) || isBlank(t.src[i+1]) || t.atEOL(i+1) || (flow && isFlowIndicator(t.src[i+1]))):
			return last, true
		case flow && isFlowIndicator(c):
			return last, true
		case !isBlank(c):
			last = i + 1
		}
	}
	return last, false
}

// plainEnd finds the end of the plain scalar at p whose value is value. A
// plain scalar may continue on more indented lines; the end is the first
// line end at which the folded text equals value.
func (t *text) plainEnd(p int, flow bool, indent int, value string) (int, bool) {
	end, stopped := t.plainLineEnd(p, flow)
	for {
		if foldPlain(t.src[p:end]) == value {
			return end, true
		}
		if stopped {
			return 0, false
		}
		// Find the next non-blank line.
		i := t.nextLine(end)
		for {
			if i >= len(t.src) {
				return 0, false
			}
			k := i
			for k < len(t.src) && isBlank(t.src[k]) {
				k++
			}
			if !t.atEOL(k) {
				break
			}
			i = t.nextLine(k)
		}
		k := i
		for k < len(t.src) && t.src[k] == ' ' {
			k++
		}
		ind := k - i
		for k < len(t.src) && isBlank(t.src[k]) {
			k++
		}
		if (!flow && ind <= indent) || t.src[k] == '#' {
			return 0, false
		}
		if ind == 0 && (bytes.HasPrefix(t.src[k:], []byte("---")) || bytes.HasPrefix(t.src[k:], []byte("..."))) {
			return 0, false
		}
		e, s := t.plainLineEnd(k, flow)
		if e == k {
			return 0, false
		}
		end, stopped = e, s
	}
}

// foldPlain folds the source of a multi-line plain scalar into its value.
func foldPlain(raw []byte) string {
	if bytes.IndexByte(raw, '\n') < 0 {
		return string(raw)
	}
	lines := strings.Split(string(raw), "\n")
	var b strings.Builder
	empty := 0
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if i > 0 {
			l = strings.TrimLeft(l, " \t")
		}
		if i < len(lines)-1 {
			l = strings.TrimRight(l, " \t")
		}
		if i > 0 && l == "" && i < len(lines)-1 {
			empty++
			continue
		}
		if i > 0 {
			if empty == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString(strings.Repeat("\n", empty))
			}
		}
		empty = 0
		b.WriteString(l)
	}
	return b.String()
}

// blockInfo describes a literal or folded scalar in the source.
type blockInfo struct {
	headerEnd     int // just after the indicators ("|-2")
	contentStart  int // start of the line after the header
	end           int // end of the last content line, or headerEnd
	contentIndent int
	hasContent    bool
}

// blockScalar scans the block scalar whose indicator is at p; indent is
// the column of the enclosing block collection.
func (t *text) blockScalar(p, indent int) (blockInfo, *editError) {
	var b blockInfo
	if p >= len(t.src) || (t.src[p] != '|' && t.src[p] != '>') {
		return b, errAt(0, ErrUnsupported, "expected a block scalar indicator")
	}
	i := p + 1
	explicit := 0
	for i < len(t.src) && (t.src[i] == '+' || t.src[i] == '-' || (t.src[i] >= '1' && t.src[i] <= '9')) {
		if t.src[i] >= '1' && t.src[i] <= '9' {
			explicit = int(t.src[i] - '0')
		}
		i++
	}
	b.headerEnd, b.end = i, i
	j := t.nextLine(i)
	b.contentStart = j
	if j >= len(t.src) {
		return b, nil
	}
	ci := 0
	if explicit > 0 {
		ci = explicit
		if indent >= 0 {
			ci = indent + explicit
		}
	} else {
		maxBlank := 0
		for k := j; k < len(t.src); {
			sp := 0
			for k+sp < len(t.src) && t.src[k+sp] == ' ' {
				sp++
			}
			maxBlank = max(maxBlank, sp)
			if !t.atEOL(k + sp) {
				break
			}
			k = t.nextLine(k + sp)
		}
		ci = max(maxBlank, indent+1, 1)
	}
	b.contentIndent = ci
	for k := j; k < len(t.src); {
		sp := 0
		for k+sp < len(t.src) && t.src[k+sp] == ' ' {
			sp++
		}
		le := t.lineEnd(k)
		switch {
		case t.atEOL(k + sp):
			if sp > ci {
				b.end, b.hasContent = le, true
			}
		case sp >= ci:
			b.end, b.hasContent = le, true
		default:
			return b, nil
		}
		k = t.nextLine(k)
	}
	return b, nil
}

// flowEnd returns the offset just after the flow collection whose opening
// bracket is at p.
func (t *text) flowEnd(p int) (int, error) {
	if p >= len(t.src) || (t.src[p] != '[' && t.src[p] != '{') {
		return 0, errAt(t.lineOf(p), ErrUnsupported, "expected a flow collection")
	}
	depth := 0
	for i := p; i < len(t.src); {
		c := t.src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
		case c == '#':
			i = t.lineEnd(i)
		case c == '[' || c == '{':
			depth++
			i++
		case c == ']' || c == '}':
			depth--
			i++
			if depth == 0 {
				return i, nil
			}
		case c == '"':
			j := i + 1
			for ; j < len(t.src) && t.src[j] != '"'; j++ {
				if t.src[j] == '\\' {
					j++
				}
			}
			i = j + 1
		case c == '\'':
			j := i + 1
			for ; j < len(t.src); j++ {
				if t.src[j] == '\'' {
					if j+1 < len(t.src) && t.src[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			i = j + 1
		case c == '!' || c == '&' || c == '*':
			for i < len(t.src) && !isBlank(t.src[i]) && !t.atEOL(i) && !isFlowIndicator(t.src[i]) {
				i++
			}
		case c == '?' || c == ':':
			i++
		default:
			// A plain scalar; a continuation on the next line is scanned
			// as if it were another one, which is all bracket matching
			// needs.
			if e, _ := t.plainLineEnd(i, true); e > i {
				i = e
			} else {
				i++
			}
		}
	}
	return 0, errAt(t.lineOf(p), ErrUnsupported, "unterminated flow collection")
}

// dashBefore returns the offset of the "-" of the block sequence entry whose
// content starts at p.
func (t *text) dashBefore(p int) (int, error) {
	i := p - 1
	for i >= 0 {
		for i >= 0 && isBlank(t.src[i]) {
			i--
		}
		if i < 0 {
			break
		}
		switch t.src[i] {
		case '-':
			return i, nil
		case '\n':
			// The entry starts on a later line than its dash: look at the
			// previous lines, skipping comment lines and blank lines.
			for {
				ls := t.lineStart(i)
				k := ls
				for k < i && isBlank(t.src[k]) {
					k++
				}
				switch {
				case k < i && t.src[k] == '-' && (k+1 >= len(t.src) || isBlank(t.src[k+1]) || t.atEOL(k+1)):
					// "-" possibly followed by a comment, or "- -".
					last := k
					for j := k; j < i; j++ {
						if t.src[j] == '#' && j > 0 && isBlank(t.src[j-1]) {
							break
						}
						if t.src[j] == '-' && (j+1 >= len(t.src) || isBlank(t.src[j+1]) || t.atEOL(j+1)) {
							last = j
						} else if !isBlank(t.src[j]) && t.src[j] != '\r' {
							return 0, errAt(t.lineOf(p), ErrUnsupported, "cannot find the \"-\" of this sequence entry")
						}
					}
					return last, nil
				case k >= i || t.src[k] == '#' || t.src[k] == '\r':
					if ls == 0 {
						return 0, errAt(t.lineOf(p), ErrUnsupported, "cannot find the \"-\" of this sequence entry")
					}
					i = ls - 1
				default:
					return 0, errAt(t.lineOf(p), ErrUnsupported, "cannot find the \"-\" of this sequence entry")
				}
			}
		default:
			return 0, errAt(t.lineOf(p), ErrUnsupported, "cannot find the \"-\" of this sequence entry")
		}
	}
	return 0, errAt(t.lineOf(p), ErrUnsupported, "cannot find the \"-\" of this sequence entry")
}

// colonAfterKey returns the offset of the ":" after the key of the pair at
// index i of the mapping at m.
func (t *text) colonAfterKey(m *loc, i int) (int, error) {
	k := m.n.Content[i]
	flow := m.flow || isFlow(m.n)
	indent := m.indent
	if !flow {
		indent = m.n.Content[0].Column - 1
	}
	if k.Kind != yaml.ScalarNode {
		return 0, errAt(k.Line, ErrUnsupported, "complex mapping keys are not supported")
	}
	start := t.nodeStart(k)
	if start < len(t.src) && t.src[start] == '?' {
		return 0, errAt(k.Line, ErrUnsupported, "explicit mapping keys (\"? \") are not supported")
	}
	e, err := t.scalarEnd(k, start, flow, indent)
	if err != nil {
		return 0, err
	}
	for e < len(t.src) && isBlank(t.src[e]) {
		e++
	}
	if e >= len(t.src) || t.src[e] != ':' {
		return 0, errAt(k.Line, ErrUnsupported, "cannot find the \":\" after key %q", k.Value)
	}
	return e, nil
}

// indicatorEnd returns the offset just after the ":" or "-" that introduces
// the node at l, which must be in a block collection.
func (t *text) indicatorEnd(l *loc) (int, error) {
	start := t.nodeStart(l.n)
	if isEmptyNull(l.n) {
		return start, nil
	}
	if l.parent.n.Kind == yaml.MappingNode {
		c, err := t.colonAfterKey(l.parent, l.idx)
		return c + 1, err
	}
	d, err := t.dashBefore(start)
	return d + 1, err
}
