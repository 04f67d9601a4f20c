package manifest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// decodeWith decodes data with the given number of workers.
func decodeWith(data []byte, opts Options, workers int) ([]Object, error) {
	d := newDecoder(opts)
	d.workers = workers
	d.decodeStream("in.yaml", data)
	return d.result()
}

// sharedMemo is a Memo every sameDecoding call shares: sections of other
// streams and other limits are in it.
var sharedMemo = NewMemo()

// sameDecoding fails when decoding data section by section on several
// goroutines, or with sections remembered by a Memo (cold, then warm, then
// one shared with other streams and limits), gives anything else than one
// after the other.
func sameDecoding(t *testing.T, data []byte, opts Options) {
	t.Helper()
	wantObjs, wantErr := decodeWith(data, opts, 1)
	memo, shared := NewMemo(), NewSharedMemo()
	for _, run := range []struct {
		workers int
		memo    *Memo
	}{{2, nil}, {5, nil}, {1, memo}, {1, memo}, {2, memo}, {5, memo}, {1, sharedMemo}, {2, sharedMemo}, {1, shared}, {2, shared}, {5, shared}} {
		workers := run.workers
		o := opts
		o.Memo = run.memo
		objs, err := decodeWith(data, o, workers)
		if run.memo != nil && !run.memo.shared && len(objs) > 0 {
			// What a call returns is the caller's.
			objs[0].Object.Object["mutated"] = true
			objs[0].Raw = append(objs[0].Raw[:0], "mutated"...)
			objs, err = decodeWith(data, o, workers)
		}
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("workers=%d: error\n%v\nwant\n%v", workers, err, wantErr)
		}
		if len(objs) != len(wantObjs) {
			t.Fatalf("workers=%d: %d objects, want %d", workers, len(objs), len(wantObjs))
		}
		for i := range objs {
			if objs[i].Source != wantObjs[i].Source || string(objs[i].Raw) != string(wantObjs[i].Raw) ||
				!reflect.DeepEqual(objs[i].Object.Object, wantObjs[i].Object.Object) {
				t.Fatalf("workers=%d: object %d is %s %s, want %s %s", workers, i, objs[i].Source, objs[i].Raw, wantObjs[i].Source, wantObjs[i].Raw)
			}
		}
	}
}

// aliasDoc is a document whose aliases expand to 9^depth nodes or so.
func aliasDoc(name string, depth int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\nlol:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n", name)
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "  a%d: &a%d [*a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d]\n", i, i, i-1)
	}
	return b.String()
}

func TestParallelDecodingIsSequential(t *testing.T) {
	many := func(n int, doc func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("---\n" + doc(i))
		}
		return b.String()
	}
	cm := func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\ndata: {k: v%d}\n", i, i)
	}
	list := func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata: {name: l%d-a}\n- metadata: {name: l%d-b}\n- {kind: Bad}\n", i, i)
	}
	mixed := func(i int) string {
		switch i % 7 {
		case 0:
			return cm(i)
		case 1:
			return list(i)
		case 2:
			return "a: [unclosed\n"
		case 3:
			return "# only a comment\n"
		case 4:
			return fmt.Sprintf("apiVersion: v1\nkind: A\nmetadata: {name: d%d}\nx: 1\nx: 2\n", i)
		case 5:
			return aliasDoc(fmt.Sprintf("alias-%d", i), 2)
		}
		return "- not a mapping\n"
	}
	for _, tc := range []struct {
		name string
		in   string
		opts Options
	}{
		{"plain", many(300, cm), Options{}},
		{"mixed", many(300, mixed), Options{}},
		{"bad separators", strings.ReplaceAll(many(100, cm), "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c5", "--- x\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c5"), Options{}},
		{"documents run out in a batch", many(300, cm), Options{MaxDocuments: 150}},
		{"documents run out in a list", many(300, mixed), Options{MaxDocuments: 200}},
		{"documents run out at the first", many(10, cm), Options{MaxDocuments: 1}},
		// Each document expands to about 800 alias nodes: the budget runs
		// out after a few, at a node that depends on what the documents
		// before used.
		{"aliases run out", many(100, func(i int) string { return aliasDoc(fmt.Sprintf("a%d", i), 3) }), Options{MaxAliasNodes: 5000}},
		{"aliases run out mixed", many(300, mixed), Options{MaxAliasNodes: 3000}},
		{"alias bomb", many(20, cm) + "---\n" + billionLaughs + many(20, cm), Options{}},
		{"too deep", many(50, cm) + "---\na: [[[[[[x]]]]]]\n" + many(50, cm), Options{MaxDepth: 4}},
		{"json then yaml", `{"apiVersion":"v1","kind":"A","metadata":{"name":"j"}}` + "\n" + many(100, mixed), Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameDecoding(t, []byte(tc.in), tc.opts)
		})
	}
}

// FuzzParallelDecoding compares decoding on several goroutines with one
// after the other, on streams of several documents.
func FuzzParallelDecoding(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: A\nmetadata: {name: a}\n"), 3, 10)
	f.Add([]byte(billionLaughs), 2, 1000)
	f.Add([]byte(aliasDoc("x", 2)), 20, 2000)
	f.Add([]byte("apiVersion: v1\nkind: AList\nitems: [{metadata: {name: a}}, {metadata: {name: b}}]\n"), 10, 100)
	f.Fuzz(func(t *testing.T, doc []byte, copies, maxAliasNodes int) {
		copies = 1 + abs(copies)%80
		var b strings.Builder
		for i := range copies {
			fmt.Fprintf(&b, "---\n%s\n", strings.ReplaceAll(string(doc), "NAME", fmt.Sprint(i)))
		}
		sameDecoding(t, []byte(b.String()), Options{MaxDepth: 20, MaxAliasNodes: 1 + abs(maxAliasNodes)%20000, MaxDocuments: 1 + copies*2/3})
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
