package report

import (
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"
)

// A side-by-side line diff of two YAML documents for the HTML page:
// unchanged stretches folded to a few lines of context, changed line pairs
// with the differing part of each line highlighted.

// sbsContext is how many unchanged lines are kept around a change.
const sbsContext = 3

type sbsView struct {
	Rows      []sbsRow
	Identical bool
	Changed   int // rows that differ
}

type sbsRow struct {
	// Kind is "eq", "chg" (both sides, different), "del" (left only),
	// "ins" (right only) or "skip" (Skip unchanged lines folded).
	Kind   string
	LN, RN int // line numbers, 0 for none
	L, R   []sbsSeg
	Skip   int
}

type sbsSeg struct {
	Text string
	Hl   bool
}

func sideBySide(left, right string) *sbsView {
	a, b := splitLinesKeep(left), splitLinesKeep(right)
	v := &sbsView{}
	m := difflib.NewMatcher(a, b)
	groups := m.GetGroupedOpCodes(sbsContext)
	if len(groups) == 0 || len(groups) == 1 && len(groups[0]) == 1 && groups[0][0].Tag == 'e' {
		v.Identical = true
		return v
	}
	prevI := 0
	for _, g := range groups {
		if first := g[0]; first.I1 > prevI {
			v.Rows = append(v.Rows, sbsRow{Kind: "skip", Skip: first.I1 - prevI})
		}
		for _, op := range g {
			switch op.Tag {
			case 'e':
				for k := 0; k < op.I2-op.I1; k++ {
					t := []sbsSeg{{Text: a[op.I1+k]}}
					v.Rows = append(v.Rows, sbsRow{Kind: "eq", LN: op.I1 + k + 1, RN: op.J1 + k + 1, L: t, R: t})
				}
			case 'd':
				for i := op.I1; i < op.I2; i++ {
					v.Rows = append(v.Rows, sbsRow{Kind: "del", LN: i + 1, L: []sbsSeg{{Text: a[i], Hl: true}}})
					v.Changed++
				}
			case 'i':
				for j := op.J1; j < op.J2; j++ {
					v.Rows = append(v.Rows, sbsRow{Kind: "ins", RN: j + 1, R: []sbsSeg{{Text: b[j], Hl: true}}})
					v.Changed++
				}
			case 'r':
				n := max(op.I2-op.I1, op.J2-op.J1)
				for k := 0; k < n; k++ {
					i, j := op.I1+k, op.J1+k
					row := sbsRow{Kind: "chg"}
					switch {
					case i < op.I2 && j < op.J2:
						row.LN, row.RN = i+1, j+1
						row.L, row.R = inlineDiff(a[i], b[j])
					case i < op.I2:
						row.Kind, row.LN, row.L = "del", i+1, []sbsSeg{{Text: a[i], Hl: true}}
					default:
						row.Kind, row.RN, row.R = "ins", j+1, []sbsSeg{{Text: b[j], Hl: true}}
					}
					v.Rows = append(v.Rows, row)
					v.Changed++
				}
			}
		}
		prevI = g[len(g)-1].I2
	}
	if prevI < len(a) {
		v.Rows = append(v.Rows, sbsRow{Kind: "skip", Skip: len(a) - prevI})
	}
	return v
}

func splitLinesKeep(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// inlineDiff highlights what differs between two versions of a line: the
// part between their common prefix and common suffix.
func inlineDiff(a, b string) (l, r []sbsSeg) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	for p > 0 && !utf8.RuneStart(a[p]) {
		p--
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	for s > 0 && !utf8.RuneStart(a[len(a)-s]) {
		s--
	}
	split := func(x string) []sbsSeg {
		var out []sbsSeg
		if p > 0 {
			out = append(out, sbsSeg{Text: x[:p]})
		}
		if mid := x[p : len(x)-s]; mid != "" {
			out = append(out, sbsSeg{Text: mid, Hl: true})
		}
		if s > 0 {
			out = append(out, sbsSeg{Text: x[len(x)-s:]})
		}
		return out
	}
	return split(a), split(b)
}
