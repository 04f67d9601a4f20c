package yamledit

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// gen writes random YAML documents in the styles people use: indentation
// steps, lists indented or not under their key, flow collections, quoting,
// block scalars, comments and blank lines, CRLF. The editor is expected to
// handle every one of them (no ErrUnsupported).
type gen struct {
	r    *rand.Rand
	step int
	eol  string
	b    strings.Builder
}

var genWords = []string{"web", "nginx:1.27", "registry.internal/nginx:1.27", "a b", "x-y", "http://h:80/p", "ServerSideApply=true", "ключ", "-Xmx1g"}
var genKeys = []string{"name", "image", "app.kubernetes.io/name", "spec", "metadata", "labels", "containers", "env", "value", "args", "k", "data"}

// genNewKeys are keys for new entries, some of which need quoting.
var genNewKeys = []string{"new", "true", "a: b", "08", "with space", "x/y~z", "-", "ключ", "#hash"}

func (g *gen) word() string { return genWords[g.r.Intn(len(genWords))] }

func (g *gen) value(depth int) any {
	switch n := g.r.Intn(10); {
	case depth > 3 || n < 4:
		switch g.r.Intn(8) {
		case 0:
			return int64(g.r.Intn(100))
		case 1:
			return g.r.Intn(2) == 0
		case 2:
			return nil
		case 3:
			return "line one\nline two\n"
		case 4:
			return "true"
		case 5:
			return 0.5
		}
		return g.word()
	case n < 7:
		m := map[string]any{}
		for i := g.r.Intn(4); i >= 0; i-- {
			m[genKeys[g.r.Intn(len(genKeys))]] = g.value(depth + 1)
		}
		return m
	default:
		var l []any
		for i := g.r.Intn(4); i >= 0; i-- {
			l = append(l, g.value(depth+1))
		}
		return l
	}
}

func (g *gen) line(s string) { g.b.WriteString(s + g.eol) }

func (g *gen) maybeComment(ind int) {
	switch g.r.Intn(8) {
	case 0:
		g.line(spaces(ind) + "# a comment")
	case 1:
		g.line("")
	}
}

func (g *gen) trailing() string {
	switch g.r.Intn(8) {
	case 0:
		return "  # note"
	case 1:
		return "\t# tab note"
	}
	return ""
}

// scalar writes a scalar in a random style that reads back as v.
func (g *gen) scalar(v any, ind int, flow bool) string {
	s, ok := v.(string)
	if !ok {
		switch v.(type) {
		case nil:
			opts := []string{"null", "~"}
			if !flow {
				opts = append(opts, "")
			}
			return opts[g.r.Intn(len(opts))]
		case map[string]any:
			return "{}"
		case []any:
			return "[]"
		}
		return fmt.Sprint(v)
	}
	if strings.Contains(s, "\n") && !flow && g.r.Intn(2) == 0 {
		body := strings.TrimSuffix(s, "\n")
		return "|" + g.eol + spaces(ind) + strings.ReplaceAll(body, "\n", g.eol+spaces(ind))
	}
	switch g.r.Intn(3) {
	case 0:
		if plainOK(s, flow, false) {
			return s
		}
	case 1:
		if singleQuoteOK(s) {
			return "'" + strings.ReplaceAll(s, "'", "''") + "'"
		}
	}
	return doubleQuote(s)
}

func (g *gen) flow(v any) string {
	switch x := v.(type) {
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(x) {
			parts = append(parts, k+": "+g.flow(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, g.flow(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return g.scalar(v, 0, true)
}

func small(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if isCollection(e) {
				return false
			}
			if s, ok := e.(string); ok && strings.Contains(s, "\n") {
				return false
			}
		}
		return len(x) <= 3
	case []any:
		for _, e := range x {
			if isCollection(e) {
				return false
			}
			if s, ok := e.(string); ok && strings.Contains(s, "\n") {
				return false
			}
		}
		return len(x) <= 3
	}
	return true
}

// block writes the entries of a non-empty map at column ind; the first line
// continues the current line if first is set.
func (g *gen) mapping(m map[string]any, ind int, first bool) {
	for i, k := range sortedKeys(m) {
		if i > 0 || !first {
			g.maybeComment(ind)
			g.b.WriteString(spaces(ind))
		}
		g.entry(k, m[k], ind)
	}
}

func (g *gen) entry(k string, v any, ind int) {
	g.b.WriteString(k + ":")
	switch {
	case isCollection(v) && small(v) && g.r.Intn(3) == 0:
		g.line(" " + g.flow(v) + g.trailing())
	case isCollection(v):
		g.line(g.trailing())
		if m, ok := v.(map[string]any); ok {
			g.mapping(m, ind+g.step, false)
		} else {
			si := ind + g.step
			if g.r.Intn(2) == 0 {
				si = ind
			}
			g.list(v.([]any), si, false)
		}
	default:
		sc := g.scalar(v, ind+g.step, false)
		if sc == "" {
			g.line(g.trailing())
		} else {
			g.line(" " + sc + g.trailing())
		}
	}
}

func (g *gen) list(l []any, ind int, first bool) {
	for i, e := range l {
		if i > 0 || !first {
			g.maybeComment(ind)
			g.b.WriteString(spaces(ind))
		}
		g.b.WriteString("-")
		switch {
		case isCollection(e) && small(e) && g.r.Intn(3) == 0:
			g.line(" " + g.flow(e))
		case isCollection(e):
			g.b.WriteString(" ")
			if m, ok := e.(map[string]any); ok {
				g.mapping(m, ind+2, true)
			} else {
				g.list(e.([]any), ind+2, true)
			}
		default:
			sc := g.scalar(e, ind+2, false)
			if sc == "" {
				g.line("")
			} else {
				g.line(" " + sc + g.trailing())
			}
		}
	}
}

// document generates a random file and the data of its documents.
func genFile(seed int64) (string, []any) {
	g := &gen{r: rand.New(rand.NewSource(seed)), step: 2, eol: "\n"}
	if g.r.Intn(3) == 0 {
		g.step = 4
	}
	if g.r.Intn(4) == 0 {
		g.eol = "\r\n"
	}
	var docs []any
	for d := g.r.Intn(3); d >= 0; d-- {
		if len(docs) > 0 || g.r.Intn(2) == 0 {
			g.line("---" + []string{"", " # doc"}[g.r.Intn(2)])
		}
		g.maybeComment(0)
		m := map[string]any{"kind": "Thing"}
		for i := g.r.Intn(4); i >= 0; i-- {
			m[genKeys[g.r.Intn(len(genKeys))]] = g.value(0)
		}
		g.mapping(m, 0, false)
		docs = append(docs, m)
	}
	s := g.b.String()
	if g.r.Intn(4) == 0 {
		s = strings.TrimRight(s, "\r\n")
	}
	return s, docs
}

// randomEdit makes random edits to a generated file and checks each.
func randomEdit(t *testing.T, seed int64) {
	src, _ := genFile(seed)
	f, err := Parse("gen.yaml", []byte(src))
	if err != nil {
		t.Fatalf("seed %d: generated file does not parse: %v\n%s", seed, err, src)
	}
	r := rand.New(rand.NewSource(seed + 1))
	g := &gen{r: r}
	for i := 0; i < 3; i++ {
		cur := f.Bytes()
		doc := r.Intn(f.Documents())
		d := f.docs[doc]
		before, err := kubectlView(f.data[d.start:d.end])
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var ptrs [][]string
		pointers(before, nil, &ptrs)
		toks := ptrs[r.Intn(len(ptrs))]
		v := g.value(1)
		snapshot, _ := Parse("gen.yaml", cur)
		var want any
		switch r.Intn(5) {
		case 0:
			if len(toks) == 0 {
				continue
			}
			err = f.Remove(doc, formatPointer(toks))
			if err == nil {
				want, _ = dataRemove(before, toks)
			}
		case 1:
			toks = subToks(toks, genNewKeys[r.Intn(len(genNewKeys))])
			err = f.Set(doc, formatPointer(toks), v)
			if err == nil {
				want, _ = dataSet(before, toks, v)
			}
		case 2:
			toks = subToks(toks, "-")
			err = f.Set(doc, formatPointer(toks), v)
			if err == nil {
				want, _ = dataSet(before, toks, v)
			}
		default:
			err = f.Set(doc, formatPointer(toks), v)
			if err == nil {
				want, _ = dataSet(before, toks, v)
			}
		}
		if err != nil {
			if errors.Is(err, ErrUnsupported) {
				t.Fatalf("seed %d edit %d: %s %v: %v\n%s", seed, i, formatPointer(toks), v, err, cur)
			}
			continue
		}
		checkEdit(t, snapshot, f.Bytes(), doc, want)
	}
}

func TestGeneratedEdits(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 50
	}
	for seed := int64(0); seed < int64(n); seed++ {
		randomEdit(t, seed)
	}
}

// FuzzGenerated runs random edits on generated files.
func FuzzGenerated(f *testing.F) {
	f.Add(int64(0))
	f.Fuzz(func(t *testing.T, seed int64) { randomEdit(t, seed) })
}
