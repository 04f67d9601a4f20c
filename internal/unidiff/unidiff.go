// Package unidiff writes unified diffs of text with difflib's matcher,
// fast on large files with small edits.
package unidiff

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// Diff returns the unified diff from a to b (lines with their line ends,
// as difflib.SplitLines gives them) with context lines around each change,
// in the form difflib.GetUnifiedDiffString writes; "" when they are equal.
// The lines a and b share at both ends are left out of the matching:
// difflib indexes every line of b and matches in quadratic time at worst,
// so a one-line fix of a file of 80,000 lines would otherwise cost the
// file. Within the rest, difflib's matcher decides.
func Diff(a, b []string, from, to string, context int) string {
	return diff(a, b, from, to, context, 0)
}

// DiffBytes is Diff of difflib.SplitLines(string(a)) and
// difflib.SplitLines(string(b)), splitting only the part of the texts
// around what differs: the lines both share at the start and at the end
// beyond the context are neither copied nor split, so a small edit of a
// large file costs the edit.
func DiffBytes(a, b []byte, from, to string, context int) string {
	if bytes.Equal(a, b) {
		return ""
	}
	// Whole lines both share at the start: up to the last line end in
	// their common bytes.
	p, s := CommonEndsBytes(a, b)
	pre := bytes.LastIndexByte(a[:p], '\n') + 1
	start := pre
	for range context {
		if start == 0 {
			break
		}
		start = bytes.LastIndexByte(a[:start-1], '\n') + 1
	}
	// Whole lines both share at the end: from the first line end inside
	// their common bytes (after the shared start), so that what precedes
	// them ends a line on both sides.
	end := len(a)
	if i := bytes.IndexByte(a[len(a)-s:], '\n'); i >= 0 {
		end = len(a) - s + i + 1
		for range context {
			if end == len(a) {
				break
			}
			if j := bytes.IndexByte(a[end:], '\n'); j >= 0 {
				end += j + 1
			} else {
				end = len(a)
			}
		}
	}
	cut := len(a) - end
	offset := bytes.Count(a[:start], []byte{'\n'})
	return diff(windowLines(a[start:end], end == len(a)), windowLines(b[start:len(b)-cut], cut == 0), from, to, context, offset)
}

// CommonEndsBytes is CommonEnds of two texts, compared a block of bytes at
// a time (bytes.Equal is vectorised): a fix's edit of a large file is
// found without walking it byte by byte.
func CommonEndsBytes(a, b []byte) (start, end int) {
	start = commonPrefix(a, b)
	return start, commonSuffix(a[start:], b[start:])
}

// commonPrefix is how many bytes a and b share at their start.
func commonPrefix(a, b []byte) int {
	const block = 256
	n := 0
	for n+block <= min(len(a), len(b)) && bytes.Equal(a[n:n+block], b[n:n+block]) {
		n += block
	}
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// commonSuffix is how many bytes a and b share at their end.
func commonSuffix(a, b []byte) int {
	const block = 256
	n := 0
	for n+block <= min(len(a), len(b)) && bytes.Equal(a[len(a)-n-block:len(a)-n], b[len(b)-n-block:len(b)-n]) {
		n += block
	}
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// windowLines splits w as difflib.SplitLines splits the text it is a window
// of: a window that ends before the text's end ends with a line end and
// has no last line of its own (SplitLines adds one at the end).
func windowLines(w []byte, last bool) []string {
	if last {
		return difflib.SplitLines(string(w))
	}
	lines := strings.SplitAfter(string(w), "\n")
	return lines[:len(lines)-1]
}

// diff is Diff of lines offset lines into both texts (the lines before are
// equal and out of every hunk's context).
func diff(a, b []string, from, to string, context, offset int) string {
	pre, suf := CommonEnds(a, b)
	if pre == len(a) && pre == len(b) {
		return ""
	}
	codes := []difflib.OpCode{{Tag: 'e', I1: 0, I2: pre, J1: 0, J2: pre}}
	for _, c := range difflib.NewMatcher(a[pre:len(a)-suf], b[pre:len(b)-suf]).GetOpCodes() {
		codes = append(codes, difflib.OpCode{Tag: c.Tag, I1: pre + c.I1, I2: pre + c.I2, J1: pre + c.J1, J2: pre + c.J2})
	}
	codes = append(codes, difflib.OpCode{Tag: 'e', I1: len(a) - suf, I2: len(a), J1: len(b) - suf, J2: len(b)})
	var w strings.Builder
	fmt.Fprintf(&w, "--- %s\n+++ %s\n", from, to)
	for _, g := range groups(codes, context) {
		first, last := g[0], g[len(g)-1]
		fmt.Fprintf(&w, "@@ -%s +%s @@\n", lineRange(offset+first.I1, offset+last.I2), lineRange(offset+first.J1, offset+last.J2))
		for _, c := range g {
			if c.Tag == 'e' {
				writeLines(&w, " ", a[c.I1:c.I2])
				continue
			}
			if c.Tag == 'r' || c.Tag == 'd' {
				writeLines(&w, "-", a[c.I1:c.I2])
			}
			if c.Tag == 'r' || c.Tag == 'i' {
				writeLines(&w, "+", b[c.J1:c.J2])
			}
		}
	}
	return w.String()
}

// CommonEnds returns how many elements a and b share at their start, and
// then how many more at their end (never counting one twice).
func CommonEnds[E comparable](a, b []E) (start, end int) {
	for start < len(a) && start < len(b) && a[start] == b[start] {
		start++
	}
	for end < len(a)-start && end < len(b)-start && a[len(a)-1-end] == b[len(b)-1-end] {
		end++
	}
	return start, end
}

// groups cuts opcodes into hunks as difflib's GetGroupedOpCodes does: at
// most n equal lines before and after each change, a new hunk where more
// than 2n equal lines part two changes. Equal opcodes of no lines (the
// ends Diff adds) are dropped first.
func groups(codes []difflib.OpCode, n int) [][]difflib.OpCode {
	var kept []difflib.OpCode
	for _, c := range codes {
		if c.Tag == 'e' && c.I1 == c.I2 {
			continue
		}
		kept = append(kept, c)
	}
	codes = kept
	if first := &codes[0]; first.Tag == 'e' {
		first.I1, first.J1 = max(first.I1, first.I2-n), max(first.J1, first.J2-n)
	}
	if last := &codes[len(codes)-1]; last.Tag == 'e' {
		last.I2, last.J2 = min(last.I2, last.I1+n), min(last.J2, last.J1+n)
	}
	var out [][]difflib.OpCode
	var group []difflib.OpCode
	for _, c := range codes {
		if c.Tag == 'e' && c.I2-c.I1 > 2*n {
			group = append(group, difflib.OpCode{Tag: 'e', I1: c.I1, I2: min(c.I2, c.I1+n), J1: c.J1, J2: min(c.J2, c.J1+n)})
			out = append(out, group)
			group = nil
			c.I1, c.J1 = max(c.I1, c.I2-n), max(c.J1, c.J2-n)
		}
		group = append(group, c)
	}
	if len(group) > 0 && !(len(group) == 1 && group[0].Tag == 'e') {
		out = append(out, group)
	}
	return out
}

func writeLines(w *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		w.WriteString(prefix)
		w.WriteString(l)
	}
}

// lineRange is a hunk's range of lines [start, stop) as unified diffs
// write it: from line 1, the length left out when it is 1, and an empty
// range at the line before it.
func lineRange(start, stop int) string {
	begin, length := start+1, stop-start
	switch length {
	case 1:
		return fmt.Sprintf("%d", begin)
	case 0:
		begin--
	}
	return fmt.Sprintf("%d,%d", begin, length)
}
