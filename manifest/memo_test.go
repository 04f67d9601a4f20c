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

// A section that moves (lines added or taken above it) is replayed with
// its lines moved, as decoding the new file afresh gives them; a section
// that decoded with errors is decoded again, since its messages quote
// lines. With a shared memo, the objects of moved sections are those
// decoded first.
func TestMemoMovedSections(t *testing.T) {
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n"
	}
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: t}\n"
	bad := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: [unclosed\n"
	for _, tc := range []struct {
		name        string
		before      string
		after       string
		sameObjects []bool // per object of after: decoded first (shared memo)
	}{{
		name:        "lines added above",
		before:      cm("a") + "---\n" + cm("b") + "---\n" + list,
		after:       cm("a") + "data: {k: v}\n---\n" + cm("b") + "---\n" + list,
		sameObjects: []bool{false, true, true, true},
	}, {
		name:        "lines taken above",
		before:      cm("a") + "data: {k: v, l: w}\n---\n" + cm("b"),
		after:       cm("a") + "---\n" + cm("b"),
		sameObjects: []bool{false, true},
	}, {
		name:        "section with an error moves",
		before:      cm("a") + "---\n" + bad + "---\n" + cm("b"),
		after:       "# a comment\n" + cm("a") + "---\n" + bad + "---\n" + cm("b"),
		sameObjects: []bool{false, true},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			wantObjs, wantErr := decodeWith([]byte(tc.after), Options{}, 1)
			for _, memo := range []*Memo{NewMemo(), NewSharedMemo()} {
				first, _ := decodeWith([]byte(tc.before), Options{Memo: memo}, 2)
				objs, err := decodeWith([]byte(tc.after), Options{Memo: memo}, 2)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Fatalf("shared=%v: error\n%v\nwant\n%v", memo.shared, err, wantErr)
				}
				if len(objs) != len(wantObjs) || len(objs) != len(tc.sameObjects) {
					t.Fatalf("shared=%v: %d objects, want %d", memo.shared, len(objs), len(wantObjs))
				}
				for i, o := range objs {
					if o.Source != wantObjs[i].Source || string(o.Raw) != string(wantObjs[i].Raw) {
						t.Errorf("shared=%v: object %d at %s %s, want %s %s", memo.shared, i, o.Source, o.Raw, wantObjs[i].Source, wantObjs[i].Raw)
					}
					same := false
					for _, f := range first {
						same = same || f.Object == o.Object
					}
					if want := memo.shared && tc.sameObjects[i]; same != want {
						t.Errorf("shared=%v: object %d decoded first: %v, want %v", memo.shared, i, same, want)
					}
				}
				// The first decoding's objects keep their lines.
				again, _ := decodeWith([]byte(tc.before), Options{Memo: memo}, 2)
				for i := range first {
					if again[i].Source != first[i].Source {
						t.Errorf("shared=%v: object %d of the first file moved to %s from %s", memo.shared, i, again[i].Source, first[i].Source)
					}
				}
			}
		})
	}
}
