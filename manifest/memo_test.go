package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// A Memo forgets everything when it is full, and decodes as before after.
func TestMemoBounded(t *testing.T) {
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\n", i)
	}
	data := []byte(b.String())
	m := NewMemo()
	opts := Options{Memo: m}
	if _, err := decodeWith(data, opts, 2); err != nil {
		t.Fatal(err)
	}
	if n := len(m.entries); n != 20 {
		t.Fatalf("%d sections remembered, want 20", n)
	}
	size := maxMemoBytes - m.size + 1 // one byte too many
	m.put([32]byte{1}, size, &memoEntry{})
	if n := len(m.entries); n != 1 || m.size != size {
		t.Fatalf("a full memo kept %d sections (%d bytes)", n, m.size)
	}
	sameDecoding(t, data, opts)
}

// A shared Memo hands every call the objects it decoded first, and a
// NewMemo a copy of them.
func TestSharedMemoShares(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	for _, tc := range []struct {
		memo *Memo
		same bool
	}{{NewSharedMemo(), true}, {NewMemo(), false}} {
		first, err := decodeWith(data, Options{Memo: tc.memo}, 2)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeWith(data, Options{Memo: tc.memo}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) != 2 || len(again) != 2 {
			t.Fatalf("%d and %d objects, want 2", len(first), len(again))
		}
		for i := range first {
			if got := first[i].Object == again[i].Object; got != tc.same {
				t.Errorf("shared=%v: object %d the same on the second call: %v", tc.memo.shared, i, got)
			}
		}
	}
}
