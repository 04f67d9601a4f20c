package unidiff

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
)

func upstream(a, b []string, from, to string, context int) string {
	s, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: a, B: b, FromFile: from, ToFile: to, Context: context})
	if err != nil {
		panic(err)
	}
	return s
}

func numbered(n int, edit map[int]string) []string {
	var out []string
	for i := range n {
		if e, ok := edit[i]; ok {
			if e != "" {
				out = append(out, e)
			}
			continue
		}
		out = append(out, fmt.Sprintf("line %d\n", i))
	}
	return out
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		a, b []string
		want string
	}{
		{name: "equal", a: numbered(5, nil), b: numbered(5, nil), want: ""},
		{name: "both empty", want: ""},
		{name: "new file", b: []string{"a\n", "b\n"}, want: "--- from\n+++ to\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{name: "one line in the middle", a: numbered(20, nil), b: numbered(20, map[int]string{10: "changed\n"}),
			want: "--- from\n+++ to\n@@ -8,7 +8,7 @@\n line 7\n line 8\n line 9\n-line 10\n+changed\n line 11\n line 12\n line 13\n"},
		{name: "first line", a: numbered(3, nil), b: numbered(3, map[int]string{0: "w\n"}),
			want: "--- from\n+++ to\n@@ -1,3 +1,3 @@\n-line 0\n+w\n line 1\n line 2\n"},
		{name: "last line deleted", a: numbered(5, nil), b: numbered(5, map[int]string{4: ""}),
			want: "--- from\n+++ to\n@@ -2,4 +2,3 @@\n line 1\n line 2\n line 3\n-line 4\n"},
		{name: "two hunks", a: numbered(30, nil), b: numbered(30, map[int]string{2: "two\n", 25: ""}),
			want: "--- from\n+++ to\n@@ -1,6 +1,6 @@\n line 0\n line 1\n-line 2\n+two\n line 3\n line 4\n line 5\n@@ -23,7 +23,6 @@\n line 22\n line 23\n line 24\n-line 25\n line 26\n line 27\n line 28\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(tt.a, tt.b, "from", "to", 3)
			if got != tt.want {
				t.Errorf("Diff:\n%s\nwant:\n%s", got, tt.want)
			}
			if want := upstream(tt.a, tt.b, "from", "to", 3); got != want {
				t.Errorf("difflib on the whole texts writes:\n%s", want)
			}
		})
	}
}

// TestDiffRandom: for random edits, the diff turns a into b; where no
// line repeats (so that the alignment is not a matter of choice), it is
// exactly what difflib writes on the whole texts.
func TestDiffRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	repeating := []string{"a\n", "b\n", "---\n", "kind: X\n"}
	fresh := 0
	for i := range 3000 {
		unique := i%2 == 0
		line := func() string {
			if unique {
				fresh++
				return fmt.Sprintf("u%d\n", fresh)
			}
			return repeating[r.IntN(len(repeating))]
		}
		a := make([]string, r.IntN(300))
		for j := range a {
			a[j] = line()
		}
		b := append([]string(nil), a...)
		for range 1 + r.IntN(3) {
			switch k := r.IntN(3); {
			case k == 0 && len(b) > 0:
				b[r.IntN(len(b))] = line()
			case k == 1 && len(b) > 0:
				j := r.IntN(len(b))
				b = append(b[:j], b[j+1:]...)
			default:
				j := r.IntN(len(b) + 1)
				b = append(b[:j], append([]string{line()}, b[j:]...)...)
			}
		}
		context := r.IntN(5)
		got := Diff(a, b, "x", "y", context)
		if applied := apply(t, a, got); strings.Join(applied, "") != strings.Join(b, "") {
			t.Fatalf("case %d: the diff does not turn a into b\na: %q\nb: %q\ndiff:\n%s", i, a, b, got)
		}
		if want := upstream(a, b, "x", "y", context); unique && got != want {
			t.Fatalf("case %d (context %d)\ngot:\n%s\nwant:\n%s", i, context, got, want)
		}
	}
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n$`)

// apply applies a unified diff to a, checking every context and removed
// line against a.
func apply(t *testing.T, a []string, diff string) []string {
	t.Helper()
	if diff == "" {
		return a
	}
	lines := strings.SplitAfter(diff, "\n")
	var out []string
	at := 0
	for _, l := range lines[2:] {
		if l == "" {
			continue
		}
		if m := hunkHeader.FindStringSubmatch(l); m != nil {
			start, _ := strconv.Atoi(m[1])
			if m[2] == "0" {
				start++ // an empty range names the line before it
			}
			out = append(out, a[at:start-1]...)
			at = start - 1
			continue
		}
		switch l[0] {
		case ' ', '-':
			if a[at] != l[1:] {
				t.Fatalf("line %d is %q, the diff says %q", at+1, a[at], l[1:])
			}
			if l[0] == ' ' {
				out = append(out, a[at])
			}
			at++
		case '+':
			out = append(out, l[1:])
		}
	}
	return append(out, a[at:]...)
}

// BenchmarkDiff is a one-line edit of a file of 80,000 lines, against
// difflib on the whole file.
func BenchmarkDiff(b *testing.B) {
	var a []string
	for i := range 80000 {
		a = append(a, fmt.Sprintf("line %d\n", i%500))
	}
	edited := append([]string(nil), a...)
	edited[40000] = "changed\n"
	b.Run("unidiff", func(b *testing.B) {
		for b.Loop() {
			Diff(a, edited, "a", "b", 3)
		}
	})
	b.Run("difflib-baseline", func(b *testing.B) {
		for b.Loop() {
			upstream(a, edited, "a", "b", 3)
		}
	})
}

func TestCommonEnds(t *testing.T) {
	for _, tt := range []struct {
		a, b       string
		start, end int
	}{
		{"", "", 0, 0},
		{"abc", "abc", 3, 0},
		{"abXc", "abYc", 2, 1},
		{"aa", "aaa", 2, 0}, // the shared a's are counted at the start only
		{"xab", "yab", 0, 2},
		{"abc", "", 0, 0},
		// Long enough for CommonEndsBytes to compare blocks.
		{strings.Repeat("ab", 300) + "X" + strings.Repeat("cd", 300), strings.Repeat("ab", 300) + "Y" + strings.Repeat("cd", 300), 600, 600},
		{strings.Repeat("a", 1000), strings.Repeat("a", 1300), 1000, 0},
		{"x" + strings.Repeat("a", 700), "y" + strings.Repeat("a", 700), 0, 700},
	} {
		start, end := CommonEnds([]byte(tt.a), []byte(tt.b))
		if start != tt.start || end != tt.end {
			t.Errorf("CommonEnds(%q, %q) = %d, %d; want %d, %d", tt.a, tt.b, start, end, tt.start, tt.end)
		}
		if start, end := CommonEndsBytes([]byte(tt.a), []byte(tt.b)); start != tt.start || end != tt.end {
			t.Errorf("CommonEndsBytes(%q, %q) = %d, %d; want %d, %d", tt.a, tt.b, start, end, tt.start, tt.end)
		}
	}
}

// TestDiffBytes checks DiffBytes against Diff of the whole texts split by
// difflib, on texts that end with and without a line end, empty texts,
// edits at both ends and of line ends alone, and lines repeated so that
// the shared bytes at the ends cross line boundaries.
func TestDiffBytes(t *testing.T) {
	cases := [][2]string{
		{"", ""}, {"", "a\n"}, {"a\n", ""}, {"a", "a\n"}, {"a\n", "a"}, {"a\nb", "a\nb\n"},
		{"ab\n", "ab\nab\n"}, {"ab\nab\n", "ab\n"}, {"x\ny\n", "x\nyy\n"}, {"x\nyz\n", "x\nz\n"},
		{"\n\n\n", "\n\n"}, {"a\n\n", "a\n\n\n"}, {"line\n", "line\nline"},
	}
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "b", "ab", "\n", "\n", "kind: X\n", "---\n", "b\n"}
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		return sb.String()
	}
	for i := range 5000 {
		n := r.IntN(60)
		if i%20 == 0 {
			// Long enough for the shared ends to be compared in blocks.
			n = 500 + r.IntN(2000)
		}
		a := text(n)
		b := []byte(a)
		for range 1 + r.IntN(3) {
			at := r.IntN(len(b) + 1)
			cut := min(len(b)-at, r.IntN(4))
			b = append(b[:at:at], append([]byte(text(r.IntN(3))), b[at+cut:]...)...)
		}
		cases = append(cases, [2]string{a, string(b)})
	}
	for i, c := range cases {
		for context := range 5 {
			a, b := c[0], c[1]
			want := Diff(difflib.SplitLines(a), difflib.SplitLines(b), "x", "y", context)
			if got := DiffBytes([]byte(a), []byte(b), "x", "y", context); got != want {
				t.Fatalf("case %d (context %d): %q → %q\ngot:\n%s\nwant:\n%s", i, context, a, b, got, want)
			}
		}
	}
}

// BenchmarkDiffBytes is BenchmarkDiff's edit given as texts: DiffBytes
// against splitting both texts for Diff.
func BenchmarkDiffBytes(b *testing.B) {
	var sb strings.Builder
	for i := range 80000 {
		fmt.Fprintf(&sb, "line %d\n", i%500)
	}
	a := []byte(sb.String())
	edited := []byte(strings.Replace(sb.String(), "\nline 0\n", "\nchanged\n", 1))
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			DiffBytes(a, edited, "a", "b", 3)
		}
	})
	b.Run("split-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Diff(difflib.SplitLines(string(a)), difflib.SplitLines(string(edited)), "a", "b", 3)
		}
	})
}
