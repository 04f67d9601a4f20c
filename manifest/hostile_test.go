package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// billionLaughs is the classic alias bomb: nine levels of ten aliases, a
// few hundred bytes that expand to 10^9 nodes.
const billionLaughs = `apiVersion: v1
kind: ConfigMap
metadata: {name: lol}
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// wideBomb uses few aliases to large anchors, which slips under go-yaml's
// own alias-to-node ratio check: about 10^4 aliases expand to 10^8 nodes.
func wideBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wide}\ndata:\n  a: &a [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("x,", 10000), ","))
	b.WriteString("]\n  b: &b [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*a,", 100), ","))
	b.WriteString("]\n  c: [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*b,", 100), ","))
	b.WriteString("]\n")
	return b.String()
}

func TestAliasBombs(t *testing.T) {
	tests := map[string]string{
		"billion laughs": billionLaughs,
		"wide bomb":      wideBomb(),
		"bomb in a List item": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x}\n  data:\n" +
			"    " + strings.ReplaceAll(strings.TrimSpace(billionLaughs[strings.Index(billionLaughs, "  a:"):]), "\n  ", "\n    ") + "\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			objs, err := decodeString(in, Options{})
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("took %v; an alias bomb must be rejected before it is expanded", elapsed)
			}
			if !errors.Is(err, ErrAliasExpansion) {
				t.Fatalf("err = %v, want ErrAliasExpansion", err)
			}
			if !strings.Contains(err.Error(), "f.yaml:") || !strings.Contains(err.Error(), "MaxAliasNodes") {
				t.Errorf("message %q should name the position and the limit", err)
			}
			if len(objs) != 0 {
				t.Errorf("got %d objects", len(objs))
			}
		})
	}
}

func TestAliasBudgetIsSharedAcrossDocuments(t *testing.T) {
	// Each document expands to ~100 alias nodes; 20 documents exceed a
	// budget of 1000 even though no single document does.
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n%d}\ndata:\n  a: &a [1,2,3,4,5,6,7,8,9]\n  b: [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "---\n"+doc, i)
	}
	objs, err := decodeString(b.String(), Options{MaxAliasNodes: 1000})
	if !errors.Is(err, ErrAliasExpansion) {
		t.Fatalf("err = %v, want ErrAliasExpansion", err)
	}
	if len(objs) == 0 || len(objs) >= 20 {
		t.Errorf("got %d objects, want the ones before the budget ran out", len(objs))
	}
	if n := len(flatten(err)); n != 1 {
		t.Errorf("got %d errors, want decoding to stop at the first: %v", n, err)
	}
}

func TestLegitimateAliasesWithinBudget(t *testing.T) {
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  a: &a [1,2,3]\n  b: [*a, *a]\n"
	objs, err := decodeString(in, Options{MaxAliasNodes: 8})
	if err != nil || len(objs) != 1 {
		t.Fatalf("got %d objects, %v", len(objs), err)
	}
	b := objs[0].Object.Object["data"].(map[string]any)["b"].([]any)
	if len(b) != 2 || len(b[1].([]any)) != 3 {
		t.Errorf("aliases not expanded: %v", b)
	}
	if _, err := decodeString(in, Options{MaxAliasNodes: 7}); !errors.Is(err, ErrAliasExpansion) {
		t.Errorf("budget of 7 nodes: err = %v, want ErrAliasExpansion", err)
	}
}

func TestSelfReferentialAlias(t *testing.T) {
	for _, in := range []string{
		"apiVersion: v1\nkind: A\nmetadata: {name: a}\nx: &x [*x]\n",
		"apiVersion: v1\nkind: A\nmetadata: {name: a}\nx: &x {y: *x}\n",
		"apiVersion: v1\nkind: A\nmetadata: &m {name: a, self: [*m]}\n",
	} {
		_, err := decodeString(in, Options{})
		checkErrors(t, err, ErrSyntax, "refers to a node that contains it")
	}
}

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

func TestMaxDepth(t *testing.T) {
	head := "apiVersion: v1\nkind: A\nmetadata: {name: a}\nspec: "
	block := func(levels int) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: A\nmetadata: {name: a}\nspec:\n")
		for i := 1; i < levels; i++ {
			fmt.Fprintf(&b, "%sk:\n", strings.Repeat(" ", i))
		}
		fmt.Fprintf(&b, "%sk: v\n", strings.Repeat(" ", levels))
		return b.String()
	}
	tests := []struct {
		name    string
		in      string
		wantErr string // "" means success
	}{
		// The top-level mapping is level 1, spec's value level 2.
		{"flow at the limit", head + nested("[", "]", 9), ""},
		{"flow over the limit", head + nested("[", "]", 10), "f.yaml:4: nesting is deeper than 10 levels"},
		{"block at the limit", block(9), ""},
		{"block over the limit", block(10), "f.yaml:14: nesting is deeper than 10 levels"},
		{"JSON at the limit", `{"apiVersion":"v1","kind":"A","metadata":{"name":"a"},"spec":` + nested("[", "]", 9) + "}", ""},
		{"JSON over the limit", "{\"apiVersion\":\"v1\",\"kind\":\"A\",\"metadata\":{\"name\":\"a\"},\n\"spec\":" + nested("[", "]", 10) + "}", "f.yaml:2: nesting is deeper than 10 levels"},
		{
			"aliases add depth",
			"apiVersion: v1\nkind: A\nmetadata: {name: a}\nx: &x " + nested("[", "]", 5) + "\ny: [[[[[*x]]]]]\n",
			"f.yaml:5: alias *x expands to nesting deeper than 10 levels",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := decodeString(tt.in, Options{MaxDepth: 10})
			if tt.wantErr == "" {
				if err != nil || len(objs) != 1 {
					t.Fatalf("got %d objects, %v", len(objs), err)
				}
				return
			}
			checkErrors(t, err, ErrTooDeep, tt.wantErr)
		})
	}
}

func TestAbsurdNestingFailsFast(t *testing.T) {
	// Far beyond any limit: the parsers' own 10000-level guards or ours
	// must stop these quickly and without exhausting the stack.
	inputs := map[string]string{
		"flow sequences": "a: " + nested("[", "]", 200000),
		"flow mappings":  "a: " + nested("{a: ", "}", 100000),
		"JSON":           `{"a":` + nested("[", "]", 200000) + "}",
		"JSON objects":   nested(`{"a":`, "}", 200000),
		"block":          strings.Repeat("- ", 50000) + "x\n",
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := decodeString(in, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			var e *Error
			if !errors.As(err, &e) || errors.Is(err, ErrInternal) {
				t.Fatalf("unexpected error %T: %v", err, err)
			}
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
}

func TestMaxDocuments(t *testing.T) {
	doc := "---\napiVersion: v1\nkind: A\nmetadata: {name: a%d}\n"
	var b strings.Builder
	for i := range 5 {
		fmt.Fprintf(&b, doc, i)
		b.WriteString("---\n# empty documents are free\n")
	}
	objs, err := decodeString(b.String(), Options{MaxDocuments: 3})
	checkErrors(t, err, ErrTooManyDocuments, "f.yaml:20: more than 3 documents (MaxDocuments)")
	if len(objs) != 3 {
		t.Errorf("got %d objects, want 3", len(objs))
	}

	// List items count too.
	list := "apiVersion: v1\nkind: List\nitems:\n" + strings.Repeat("- {apiVersion: v1, kind: A, metadata: {name: a}}\n", 5)
	objs, err = decodeString(list, Options{MaxDocuments: 5})
	checkErrors(t, err, ErrTooManyDocuments, "f.yaml:1: more than 5 documents")
	if len(objs) != 0 {
		t.Errorf("got %d objects, want 0", len(objs))
	}

	// JSON streams as well.
	js := strings.Repeat(`{"apiVersion":"v1","kind":"A","metadata":{"name":"a"}}`+"\n", 4)
	objs, err = decodeString(js, Options{MaxDocuments: 2})
	checkErrors(t, err, ErrTooManyDocuments, "f.yaml:3: more than 2 documents")
	if len(objs) != 2 {
		t.Errorf("got %d objects, want 2", len(objs))
	}
}

func TestManySeparatorsAreCheap(t *testing.T) {
	in := strings.Repeat("---\n", 1<<20) + "apiVersion: v1\nkind: A\nmetadata: {name: a}\n"
	start := time.Now()
	objs, err := decodeString(in, Options{})
	if err != nil || len(objs) != 1 {
		t.Fatalf("got %d objects, %v", len(objs), err)
	}
	if got := objs[0].Source.Line; got != 1<<20+1 {
		t.Errorf("line = %d, want %d", got, 1<<20+1)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %v", elapsed)
	}
}

func TestMaxFileBytesForStreams(t *testing.T) {
	in := "apiVersion: v1\nkind: A\nmetadata: {name: a}\n"
	if _, err := decodeString(in, Options{MaxFileBytes: int64(len(in))}); err != nil {
		t.Fatalf("input of exactly MaxFileBytes: %v", err)
	}
	objs, err := decodeString(in, Options{MaxFileBytes: int64(len(in) - 1)})
	checkErrors(t, err, ErrTooLarge, "f.yaml: input is larger than the 42 bytes limit (MaxFileBytes)")
	if len(objs) != 0 {
		t.Errorf("got %d objects", len(objs))
	}
}

// The default document limit fits a platform monorepo after rendering:
// more than the 10,000 of old (issue 21 item 5).
func TestDefaultMaxDocuments(t *testing.T) {
	if DefaultOptions().MaxDocuments != 50000 || (Options{}).withDefaults().MaxDocuments != 50000 {
		t.Errorf("default MaxDocuments = %d, want 50000", DefaultOptions().MaxDocuments)
	}
	item := "- {apiVersion: v1, kind: A, metadata: {name: a}}\n"
	objs, err := decodeString("apiVersion: v1\nkind: List\nitems:\n"+strings.Repeat(item, 12000), Options{})
	if err != nil || len(objs) != 12000 {
		t.Errorf("12000 documents: got %d objects, %v", len(objs), err)
	}
	_, err = decodeString("apiVersion: v1\nkind: List\nitems:\n"+strings.Repeat(item, DefaultMaxDocuments+1), Options{})
	checkErrors(t, err, ErrTooManyDocuments, "f.yaml:1: more than 50000 documents (MaxDocuments)")
}

// An error of a limit says how to raise it by the caller's name for it.
func TestLimitNames(t *testing.T) {
	names := LimitNames{FileBytes: "--max-file-bytes", TotalBytes: "--max-total-bytes", Documents: "--max-documents"}
	doc := "apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n"
	tests := []struct {
		opts Options
		want string
	}{
		{Options{MaxDocuments: 1, LimitNames: names}, "more than 1 documents (raise it with --max-documents)"},
		{Options{MaxFileBytes: 10, LimitNames: names}, "larger than the 10 bytes limit (raise it with --max-file-bytes)"},
		{Options{MaxTotalBytes: 10, LimitNames: names}, "exceeds the 10 bytes limit (raise it with --max-total-bytes)"},
		{Options{MaxFileBytes: 10}, "limit (MaxFileBytes)"},
	}
	for _, tt := range tests {
		_, err := decodeString(doc+doc, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.opts, err, tt.want)
		}
	}
}
