package yamledit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		kind error
		msg  string // substring, including file:line
	}{
		{"too large", strings.Repeat("a", MaxFileBytes+1), ErrTooLarge, "x.yaml: file is"},
		{"syntax error names the file line", lines("a: 1", "---", "b: 1", "c: [", ""), ErrSyntax, "x.yaml:5:"},
		{"tab indentation", lines("a:", "\tb: 1"), ErrSyntax, "x.yaml:2:"},
		{"bad separator", lines("a: 1", "--- b: 1"), ErrSyntax, "x.yaml:2: invalid document separator"},
		{"two documents in one section", lines("a: 1", "...", "b: 2"), ErrSyntax, "x.yaml:2:"},
		{"invalid UTF-8", "a: \xff\n", ErrSyntax, "x.yaml:1: not valid UTF-8"},
		{"UTF-16", "\xff\xfea\x00:\x00", ErrSyntax, "UTF-16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.in))
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.kind, tc.msg)
			}
		})
	}
}

func TestDocuments(t *testing.T) {
	in := lines(
		"# leading comment", // 1
		"---",               // 2
		"a: 1",              // 3
		"---",               // 4
		"# only a comment",  // 5
		"---",               // 6
		"",                  // 7
		"b: 2",              // 8
		"c: 3",              // 9
		"--- # third",       // 10
		"d: 4",              // 11
	)
	f, err := Parse("x.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if f.Documents() != 3 {
		t.Fatalf("Documents() = %d", f.Documents())
	}
	for line, want := range map[int]int{2: 0, 3: 0, 6: 1, 7: 1, 8: 1, 9: 1, 10: 2, 11: 2} {
		got, err := f.DocumentAt(line)
		if err != nil || got != want {
			t.Errorf("DocumentAt(%d) = %d, %v; want %d", line, got, err, want)
		}
	}
	for _, line := range []int{0, 1, 4, 5, 12} {
		if _, err := f.DocumentAt(line); !errors.Is(err, ErrNotFound) {
			t.Errorf("DocumentAt(%d): %v, want ErrNotFound", line, err)
		}
	}
	// Lines stay those of the parsed file after an edit.
	if err := f.Set(0, "/x", map[string]any{"y": "z"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.DocumentAt(11); got != 2 {
		t.Errorf("after edit, DocumentAt(11) = %d", got)
	}
	// Errors name the current line.
	err = f.Set(2, "/d/e", 1)
	if err == nil || !strings.HasPrefix(err.Error(), "x.yaml:13:") {
		t.Errorf("got %v, want an error at x.yaml:13", err)
	}
}

func TestGet(t *testing.T) {
	f, err := Parse("x.yaml", []byte(lines(
		"metadata:",
		"  annotations:",
		"    a/b: x",
		"    c~d: 'y'",
		"spec:",
		"  replicas: 3",
		"  ratio: 0.5",
		"  on: yes",
		"  list: [1, two]",
		"  empty:",
	)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ptr   string
		want  any
		found bool
	}{
		{"/metadata/annotations/a~1b", "x", true},
		{"/metadata/annotations/c~0d", "y", true},
		{"/spec/replicas", int64(3), true},
		{"/spec/ratio", 0.5, true},
		{"/spec/true", true, true}, // as kubectl reads "on: yes"
		{"/spec/list/1", "two", true},
		{"/spec/list/2", nil, false},
		{"/spec/empty", nil, true},
		{"/spec/missing", nil, false},
		{"/spec/replicas/x", nil, false},
		{"", map[string]any{"x": nil}, true},
	} {
		v, found, err := f.Get(0, tc.ptr)
		if err != nil {
			t.Fatalf("Get(%q): %v", tc.ptr, err)
		}
		if tc.ptr == "" {
			if _, ok := v.(map[string]any); !ok || !found {
				t.Errorf("Get(\"\") = %v", v)
			}
			continue
		}
		if found != tc.found || !reflect.DeepEqual(v, tc.want) {
			t.Errorf("Get(%q) = %#v, %v; want %#v, %v", tc.ptr, v, found, tc.want, tc.found)
		}
	}
	if _, _, err := f.Get(0, "nope"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad pointer: %v", err)
	}
	if _, _, err := f.Get(1, "/a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bad document: %v", err)
	}
}

func TestAliasBomb(t *testing.T) {
	in := lines(
		"a: &a [x, x, x, x, x, x, x, x, x]",
		"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
		"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]",
		"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]",
		"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]",
		"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]",
		"h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]",
		"i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]",
		"---",
		"ok: 1",
	)
	f, err := Parse("bomb.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(0, "/z", 1); !errors.Is(err, ErrUnsupported) || !strings.HasPrefix(err.Error(), "bomb.yaml:1:") {
		t.Fatalf("Set: %v", err)
	}
	if _, _, err := f.Get(0, "/i"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Get: %v", err)
	}
	// Other documents of the file stay editable.
	if err := f.Set(1, "/ok", 2); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(f.Bytes()), "---\nok: 2\n") {
		t.Fatalf("got %s", f.Bytes())
	}
}

func TestOddLineBreaks(t *testing.T) {
	f, err := Parse("x.yaml", []byte("a: 1\rb: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(0, "/a", 3); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v", err)
	}
}

func TestDiff(t *testing.T) {
	f, err := Parse("app/web.yaml", []byte(lines("a: 1", "b: 2", "c: 3", "d: 4", "e: 5", "f: 6")))
	if err != nil {
		t.Fatal(err)
	}
	if f.Diff() != "" || f.Changed() {
		t.Fatal("unchanged file has a diff")
	}
	if err := f.Set(0, "/e", "five"); err != nil {
		t.Fatal(err)
	}
	want := lines(
		"--- a/app/web.yaml",
		"+++ b/app/web.yaml",
		"@@ -2,5 +2,5 @@",
		" b: 2",
		" c: 3",
		" d: 4",
		"-e: 5",
		"+e: five",
		" f: 6",
	)
	if got := f.Diff(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// Setting it back leaves no diff.
	if err := f.Set(0, "/e", 5); err != nil {
		t.Fatal(err)
	}
	if f.Changed() || f.Diff() != "" {
		t.Fatalf("diff after undo: %s", f.Diff())
	}
}

func TestDiffNoTrailingNewline(t *testing.T) {
	f, err := Parse("x.yaml", []byte("a: 1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(0, "/a", 2); err != nil {
		t.Fatal(err)
	}
	want := lines(
		"--- a/x.yaml",
		"+++ b/x.yaml",
		"@@ -1 +1 @@",
		"-a: 1",
		`\ No newline at end of file`,
		"+a: 2",
		`\ No newline at end of file`,
	)
	if got := f.Diff(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestNoPanicOnHostileInput(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, in := range []string{
		deep,
		"a: " + deep,
		strings.Repeat("- ", 5000) + "x",
		strings.Repeat("---\n", 100000),
		"a: !!binary AAAA\nb: !!timestamp 2020-01-01\n",
		"? [a, b]\n: c\n",
		"\x00",
	} {
		f, err := Parse("x.yaml", []byte(in))
		if err != nil {
			continue
		}
		for d := 0; d < f.Documents(); d++ {
			_ = f.Set(d, "/a/0/b", "x")
			_ = f.Remove(d, "/a")
			_, _, _ = f.Get(d, "/a")
		}
	}
}

func TestJSONFile(t *testing.T) {
	f, err := Parse("app/cm.json", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(0, "/metadata/labels", map[string]any{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(0, "/kind", "ConfigMap"); err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.Bytes()), `{"metadata": {"labels": {"app": "web"}}, "kind": "ConfigMap"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestCloneContentChanged edits clones of one parsed file: each clone has
// its own content and documents, the original stays as parsed, Content
// equals Bytes (with or without a byte order mark) and Changed says whether
// the content differs from the input.
func TestCloneContentChanged(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"plain", "a: 1\n---\nb: 2\n---\nc: 3\n"},
		{"bom", "\xef\xbb\xbfa: 1\n---\nb: 2\n---\nc: 3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("f.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			one, two := f.Clone(), f.Clone()
			if err := one.Set(0, "/a", "one\nline two"); err != nil {
				t.Fatal(err)
			}
			if err := two.Set(2, "/c", 4); err != nil {
				t.Fatal(err)
			}
			// A second edit after a document that grew by a line finds it
			// where it moved to.
			if err := one.Set(2, "/c", 5); err != nil {
				t.Fatal(err)
			}
			bom := ""
			if tc.name == "bom" {
				bom = "\xef\xbb\xbf"
			}
			for _, c := range []struct {
				f       *File
				want    string
				changed bool
			}{
				{f, tc.in, false},
				{one, bom + "a: |-\n  one\n  line two\n---\nb: 2\n---\nc: 5\n", true},
				{two, bom + "a: 1\n---\nb: 2\n---\nc: 4\n", true},
			} {
				if got := string(c.f.Bytes()); got != c.want {
					t.Errorf("Bytes() = %q, want %q", got, c.want)
				}
				if got := string(c.f.Content()); got != c.want {
					t.Errorf("Content() = %q, want %q", got, c.want)
				}
				if got := c.f.Changed(); got != c.changed {
					t.Errorf("Changed() of %q = %v, want %v", c.want, got, c.changed)
				}
			}
			if i, err := one.DocumentAt(5); err != nil || i != 2 {
				t.Errorf("DocumentAt(5) after edits = %d, %v; want 2 (lines of the parsed file)", i, err)
			}
		})
	}
}
