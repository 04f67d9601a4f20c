package yamledit

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fuzzValue turns the fuzzer's value string into a value: JSON if it parses
// as JSON, else the string itself.
func fuzzValue(s string) any {
	if v, err := decodeJSON([]byte(s)); err == nil && json.Valid([]byte(s)) {
		return v
	}
	return s
}

func addSeeds(f *testing.F) {
	for _, tc := range editCases {
		for _, o := range tc.ops {
			js, err := json.Marshal(o.value)
			if err != nil {
				continue
			}
			f.Add(tc.in, o.doc, o.ptr, string(js))
		}
	}
	for _, d := range sweepDocs {
		f.Add(d, 0, "/spec/template/spec/containers/0/env/1/value", `"v"`)
		f.Add(d, 1, "/data/list/0/-", `{"k":"line\nline\n"}`)
		f.Add(d, 0, "/spec/ports/1", `{"port":8080}`)
	}
	f.Add("a: 1\n", 0, "/b/-/c", `{"x":[1,"y",null]}`)
	f.Add("- a\n- b\n", 0, "/1", "multi\nline\n")
	f.Add("k: {a: [1, 2], b: 'x'}\n", 0, "/k/a/-", `"3"`)
}

// checkEdit checks a successful edit of document doc independently of the
// editor: the other documents' bytes are untouched and the edited document
// decodes to want.
func checkEdit(t *testing.T, before *File, after []byte, doc int, want any) {
	t.Helper()
	g, err := Parse("fuzz.yaml", after)
	if err != nil {
		t.Fatalf("edited file does not parse: %v\n%s", err, after)
	}
	if g.Documents() != before.Documents() {
		t.Fatalf("edit changed the number of documents from %d to %d:\n%s", before.Documents(), g.Documents(), after)
	}
	d, e := before.docs[doc], g.docs[doc]
	if !bytes.Equal(before.data[:d.start], g.data[:e.start]) || !bytes.Equal(before.data[d.end:], g.data[e.end:]) {
		t.Fatalf("edit changed bytes outside the document:\n%q\n%q", before.data, g.data)
	}
	got, err := kubectlView(g.data[e.start:e.end])
	if err != nil {
		t.Fatalf("edited document does not decode: %v\n%s", err, after)
	}
	if !equalData(got, want) {
		t.Fatalf("edited document decodes to\n%#v\nwant\n%#v\n%s", got, want, after)
	}
}

func checkErr(t *testing.T, f *File, orig []byte, err error) {
	t.Helper()
	if strings.Contains(err.Error(), "panic") {
		t.Fatalf("panic: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error is %T, not *Error: %v", err, err)
	}
	if !bytes.Equal(f.Bytes(), orig) {
		t.Fatalf("failed edit changed the file")
	}
}

func FuzzSet(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data string, doc int, pointer, value string) {
		if len(data) > 4096 || len(value) > 512 {
			return
		}
		file, err := Parse("fuzz.yaml", []byte(data))
		if err != nil {
			if strings.Contains(err.Error(), "panic") {
				t.Fatal(err)
			}
			return
		}
		if file.Documents() == 0 {
			return
		}
		doc = (doc%file.Documents() + file.Documents()) % file.Documents()
		v := fuzzValue(value)
		orig := file.Bytes()
		var want any
		d := file.docs[doc]
		before, beforeErr := kubectlView(file.data[d.start:d.end])
		snapshot, _ := Parse("fuzz.yaml", orig)
		if err := file.Set(doc, pointer, v); err != nil {
			checkErr(t, file, orig, err)
			return
		}
		if beforeErr != nil {
			if file.Changed() {
				t.Fatalf("edited a document that does not decode: %v", beforeErr)
			}
			return
		}
		toks, _ := parsePointer(pointer)
		nv, _ := normalizeValue(v, 0)
		want, err = dataSet(before, toks, nv)
		if err != nil {
			t.Fatalf("Set succeeded but the edit is invalid: %v", err)
		}
		checkEdit(t, snapshot, file.Bytes(), doc, want)
		// Setting the same value again changes nothing (unless it appends).
		if slices.Contains(toks, "-") {
			return
		}
		again := file.Bytes()
		if err := file.Set(doc, pointer, v); err != nil {
			t.Fatalf("second Set failed: %v\n%s", err, again)
		} else if !bytes.Equal(file.Bytes(), again) {
			t.Fatalf("second Set changed the file:\n%s\n%s", again, file.Bytes())
		}
	})
}

func FuzzRemove(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data string, doc int, pointer, _ string) {
		if len(data) > 4096 {
			return
		}
		file, err := Parse("fuzz.yaml", []byte(data))
		if err != nil || file.Documents() == 0 {
			return
		}
		doc = (doc%file.Documents() + file.Documents()) % file.Documents()
		orig := file.Bytes()
		d := file.docs[doc]
		before, beforeErr := kubectlView(file.data[d.start:d.end])
		snapshot, _ := Parse("fuzz.yaml", orig)
		if err := file.Remove(doc, pointer); err != nil {
			checkErr(t, file, orig, err)
			return
		}
		if beforeErr != nil {
			t.Fatalf("edited a document that does not decode: %v", beforeErr)
		}
		toks, _ := parsePointer(pointer)
		want, err := dataRemove(before, toks)
		if err != nil {
			t.Fatalf("Remove succeeded but is invalid: %v", err)
		}
		checkEdit(t, snapshot, file.Bytes(), doc, want)
	})
}
