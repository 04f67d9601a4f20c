package yamledit

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// renderer writes new values as YAML text in the style of the surrounding
// document.
type renderer struct {
	step      int    // indentation of a nested mapping
	seqIndent int    // indentation of a sequence's "-" below its key
	gap       int    // columns from "-" to the entry's content
	eol       string // line break
	// first returns keys that go first, in this order, in the mapping
	// at path; the other keys follow sorted. nil: all sorted.
	first func(path []string) []string
}

func spaces(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(" ", n)
}

// scalarOpts says where a scalar is written and how its predecessor was.
type scalarOpts struct {
	style  yaml.Style // style to keep for strings, 0 for none
	flow   bool       // inside a flow collection
	json   bool       // inside a JSON-style flow collection: quote all strings
	key    bool       // a mapping key
	indent int        // column of the content of a block scalar
}

// scalar renders v (a scalar or an empty collection). A string may come out
// as a block scalar: a header, a line break and indented lines.
func (r *renderer) scalar(v any, o scalarOpts) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case string:
		return r.str(x, o)
	case map[string]any:
		return "{}"
	case []any:
		return "[]"
	}
	return fmt.Sprint(v)
}

func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func (r *renderer) str(s string, o scalarOpts) string {
	if o.json {
		return doubleQuote(s)
	}
	style := o.style &^ yaml.TaggedStyle
	multiline := strings.Contains(s, "\n")
	if multiline && !o.flow && !o.key && style != yaml.DoubleQuotedStyle {
		if b, ok := r.literal(s, o.indent, '|'); ok {
			return b
		}
	}
	switch style {
	case yaml.DoubleQuotedStyle:
		return doubleQuote(s)
	case yaml.SingleQuotedStyle:
		if singleQuoteOK(s) {
			q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
			if roundTrips(q, s, o.flow, o.key) {
				return q
			}
		}
		return doubleQuote(s)
	case yaml.LiteralStyle, yaml.FoldedStyle:
		if !o.flow && !o.key {
			ind := byte('|')
			if style == yaml.FoldedStyle {
				ind = '>'
			}
			if b, ok := r.literal(s, o.indent, ind); ok {
				return b
			}
		}
	}
	if plainOK(s, o.flow, o.key) {
		return s
	}
	return doubleQuote(s)
}

// literal renders s as a block scalar with content at column indent. Only
// the forms that need no indentation indicator and no keep chomping are
// produced; ind is '|' or '>' (the latter only for one line).
func (r *renderer) literal(s string, indent int, ind byte) (string, bool) {
	if indent < 1 || s == "" {
		return "", false
	}
	body, header := s, string(ind)+"-"
	if strings.HasSuffix(s, "\n") {
		body, header = s[:len(s)-1], string(ind)
	}
	if strings.HasSuffix(body, "\n") || strings.TrimSpace(body) == "" {
		return "", false
	}
	if ind == '>' && strings.Contains(body, "\n") {
		return "", false
	}
	for _, c := range body {
		if c != '\n' && c != '\t' && !printable(c) {
			return "", false
		}
	}
	lines := strings.Split(body, "\n")
	first := ""
	for _, l := range lines {
		if l != "" {
			first = l
			break
		}
	}
	if first[0] == ' ' || first[0] == '\t' {
		return "", false
	}
	if last := lines[len(lines)-1]; strings.TrimSpace(last) == "" {
		return "", false
	}
	render := func(indent int, eol string) string {
		var b strings.Builder
		b.WriteString(header)
		for _, l := range lines {
			b.WriteString(eol)
			if l != "" {
				b.WriteString(spaces(indent))
				b.WriteString(l)
			}
		}
		return b.String()
	}
	if !roundTrips(render(2, "\n"), s, false, false) {
		return "", false
	}
	return render(indent, r.eol), true
}

// printable reports whether YAML allows c unescaped in a scalar, excluding
// line breaks and tabs, which need care anyway.
func printable(c rune) bool {
	switch {
	case c == utf8.RuneError:
		return false
	case c < 0x20, c == 0x7f, c >= 0x80 && c <= 0xa0, c == 0x2028, c == 0x2029, c == 0xfeff:
		return false
	case c >= 0xd800 && c <= 0xdfff, c == 0xfffe, c == 0xffff:
		return false
	}
	return true
}

func singleQuoteOK(s string) bool {
	if strings.TrimSpace(s) != s || s == "" {
		return false
	}
	for _, c := range s {
		if !printable(c) {
			return false
		}
	}
	return true
}

// doubleQuote quotes s with only the escapes YAML 1.1 and 1.2 share.
func doubleQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if printable(c) {
				b.WriteRune(c)
			} else if c <= 0xff {
				fmt.Fprintf(&b, `\x%02X`, c)
			} else {
				fmt.Fprintf(&b, `\u%04X`, c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// plainOK reports whether s can be written without quotes and still be read
// back as the string s by both YAML 1.2 (yaml.v3) and kubectl's YAML 1.1
// decoder: a plain scalar must not look like a number, a boolean, null, a
// timestamp or contain YAML syntax.
func plainOK(s string, flow, key bool) bool {
	if s == "" || strings.TrimSpace(s) != s || (key && len(s) > 512) {
		return false
	}
	for _, c := range s {
		if !printable(c) {
			return false
		}
	}
	switch s[0] {
	case '!', '&', '*', '|', '>', '\'', '"', '%', '@', '`', '#', ',', '[', ']', '{', '}', '?', ':':
		return false
	case '-':
		if len(s) == 1 || s[1] == ' ' || strings.HasPrefix(s, "---") {
			return false
		}
	}
	if strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") {
		return false
	}
	if flow && strings.ContainsAny(s, ",[]{}:#") {
		return false
	}
	return roundTrips(s, s, flow, key)
}

// roundTrips reports whether the YAML text, written as a value (or key) in
// a block or flow mapping, reads back as the string s with both yaml.v3 and
// kubectl's decoder.
func roundTrips(text, s string, flow, key bool) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	var doc string
	switch {
	case key && flow:
		doc = "{" + text + ": x}\n"
	case key:
		doc = text + ": x\n"
	case flow:
		doc = "k: [" + text + "]\n"
	default:
		doc = "k: " + text + "\n"
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil || len(n.Content) != 1 {
		return false
	}
	m := n.Content[0]
	if m.Kind != yaml.MappingNode || len(m.Content) != 2 {
		return false
	}
	sc := m.Content[1]
	switch {
	case key:
		sc = m.Content[0]
	case flow:
		if sc.Kind != yaml.SequenceNode || len(sc.Content) != 1 {
			return false
		}
		sc = sc.Content[0]
	}
	if sc.Kind != yaml.ScalarNode || sc.ShortTag() != "!!str" || sc.Value != s {
		return false
	}
	js, err := sigsyaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return false
	}
	v, err := decodeJSON(js)
	if err != nil {
		return false
	}
	mm, _ := v.(map[string]any)
	if len(mm) != 1 {
		return false
	}
	switch {
	case key:
		_, ok := mm[s]
		return ok
	case flow:
		l, _ := mm["k"].([]any)
		return len(l) == 1 && l[0] == s
	}
	return mm["k"] == s
}

// keyText renders a mapping key.
func (r *renderer) keyText(k string, style yaml.Style, flow, json bool) string {
	if json || style&^yaml.TaggedStyle == yaml.DoubleQuotedStyle {
		return doubleQuote(k)
	}
	if style&^yaml.TaggedStyle == yaml.SingleQuotedStyle && singleQuoteOK(k) {
		q := "'" + strings.ReplaceAll(k, "'", "''") + "'"
		if roundTrips(q, k, flow, true) {
			return q
		}
	}
	if plainOK(k, flow, true) {
		return k
	}
	return doubleQuote(k)
}

func isCollection(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return false
}

func (r *renderer) keys(path []string, m map[string]any) []string {
	sorted := sortedKeys(m)
	if r.first == nil {
		return sorted
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range r.first(path) {
		if _, ok := m[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	for _, k := range sorted {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// entryStyle carries the styles of neighbouring nodes, which new keys and
// string values copy.
type entryStyle struct {
	key, value yaml.Style
}

// block renders a non-empty map or list in block style so that its first
// line can be written at column col (the caller writes any indentation of
// the first line); the other lines are indented absolutely. No trailing
// line break.
func (r *renderer) block(v any, col int, path []string, st entryStyle) string {
	var b strings.Builder
	switch x := v.(type) {
	case map[string]any:
		for i, k := range r.keys(path, x) {
			if i > 0 {
				b.WriteString(r.eol)
				b.WriteString(spaces(col))
			}
			b.WriteString(r.entry(k, x[k], col, append(path[:len(path):len(path)], k), st))
		}
	case []any:
		for i, e := range x {
			if i > 0 {
				b.WriteString(r.eol)
				b.WriteString(spaces(col))
			}
			b.WriteString(r.item(e, col, append(path[:len(path):len(path)], "-"), st))
		}
	default:
		b.WriteString(r.scalar(v, scalarOpts{style: st.value, indent: col + r.step}))
	}
	return b.String()
}

// entry renders "key: value" for a key at column col.
func (r *renderer) entry(k string, v any, col int, path []string, st entryStyle) string {
	kt := r.keyText(k, st.key, false, false)
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			c := col + r.step
			return kt + ":" + r.eol + spaces(c) + r.block(v, c, path, entryStyle{})
		}
	case []any:
		if len(x) > 0 {
			c := col + r.seqIndent
			return kt + ":" + r.eol + spaces(c) + r.block(v, c, path, entryStyle{})
		}
	}
	return kt + ": " + r.scalar(v, scalarOpts{style: st.value, indent: col + r.step})
}

// item renders "- value" for a dash at column col.
func (r *renderer) item(v any, col int, path []string, st entryStyle) string {
	c := col + r.gap
	prefix := "-" + spaces(r.gap-1)
	if isCollection(v) {
		return prefix + r.block(v, c, path, entryStyle{})
	}
	return prefix + r.scalar(v, scalarOpts{style: st.value, indent: c})
}

// flow renders v in flow style.
func (r *renderer) flow(v any, json bool, st entryStyle) string {
	switch x := v.(type) {
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(x) {
			parts = append(parts, r.flowEntry(k, x[k], json, entryStyle{}))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, r.flow(e, json, entryStyle{}))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return r.scalar(v, scalarOpts{style: st.value, flow: true, json: json})
}

func (r *renderer) flowEntry(k string, v any, json bool, st entryStyle) string {
	return r.keyText(k, st.key, true, json) + ": " + r.flow(v, json, entryStyle{value: st.value})
}

// styleStats counts the indentation and line breaks a file uses, so that
// new text can follow them.
type styleStats struct {
	step, seq, gap map[int]int
	crlf, lf       int
}

func newStyleStats() *styleStats {
	return &styleStats{step: map[int]int{}, seq: map[int]int{}, gap: map[int]int{}}
}

func (st *styleStats) add(t *text, root *yaml.Node) {
	st.crlf += bytes.Count(t.src, []byte("\r\n"))
	st.lf += bytes.Count(t.src, []byte("\n"))
	st.walk(t, root, 0)
}

func (st *styleStats) walk(t *text, n *yaml.Node, depth int) {
	if n == nil || depth > 200 || isFlow(n) {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Line > k.Line && !isFlow(v) && len(v.Content) > 0 && v.Anchor == "" && v.Style&yaml.TaggedStyle == 0 {
				switch v.Kind {
				case yaml.MappingNode:
					if d := v.Column - k.Column; d > 0 {
						st.step[d]++
					}
				case yaml.SequenceNode:
					if d := v.Column - k.Column; d >= 0 {
						st.seq[d]++
					}
				}
			}
			st.walk(t, v, depth+1)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if c.Line == n.Line && c.Kind == yaml.MappingNode && c == n.Content[0] {
				if d := c.Column - n.Column; d >= 2 {
					st.gap[d]++
				}
			}
			st.walk(t, c, depth+1)
		}
	}
}

func mostCommon(m map[int]int, def int) int {
	best, bestN := def, 0
	for k, n := range m {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best
}

func (st *styleStats) renderer() renderer {
	r := renderer{eol: "\n"}
	r.step = mostCommon(st.step, 2)
	r.seqIndent = mostCommon(st.seq, r.step)
	r.gap = mostCommon(st.gap, 2)
	if st.crlf > 0 && st.crlf*2 >= st.lf {
		r.eol = "\r\n"
	}
	return r
}
