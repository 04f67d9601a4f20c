package fix

import (
	"bytes"
	"testing"
)

// Compact keeps what Content, Paths, Creates and Diff give, whatever the
// old and new contents share.
func TestCompact(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before, now []byte
	}{
		{"created", nil, []byte("a: 1\n")},
		{"created empty", nil, []byte{}},
		{"one value", []byte("a: 1\nb: 2\nc: 3\n"), []byte("a: 1\nb: 5\nc: 3\n")},
		{"line added", []byte("a: 1\nc: 3\n"), []byte("a: 1\nb: 2\nc: 3\n")},
		{"line removed", []byte("a: 1\nb: 2\nc: 3\n"), []byte("a: 1\nc: 3\n")},
		{"repeated bytes", []byte("aaaa"), []byte("aaaaaa")},
		{"repeated bytes shorter", []byte("aaaaaa"), []byte("aa")},
		{"emptied", []byte("a: 1\n"), []byte{}},
		{"same", []byte("a: 1\n"), []byte("a: 1\n")},
		{"all new", []byte("xyz"), []byte("abc")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const path = "/repo/f.yaml"
			c := &Candidate{Files: map[string][]byte{path: tc.now}, Before: map[string][]byte{path: tc.before}}
			diff, paths, creates := c.Diff(path), c.Paths(), c.Creates(path)
			c.Compact()
			if c.Files != nil {
				t.Fatal("Files kept")
			}
			if got := c.Content(path); !bytes.Equal(got, tc.now) {
				t.Errorf("Content %q, want %q", got, tc.now)
			}
			if got := c.Diff(path); got != diff {
				t.Errorf("Diff\n%s\nwant\n%s", got, diff)
			}
			if got := c.Paths(); len(got) != 1 || got[0] != paths[0] {
				t.Errorf("Paths %v, want %v", got, paths)
			}
			if c.Creates(path) != creates {
				t.Errorf("Creates %v, want %v", !creates, creates)
			}
		})
	}
}
