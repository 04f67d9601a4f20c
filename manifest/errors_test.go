package manifest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"testing"
)

func TestSourceString(t *testing.T) {
	tests := []struct {
		src  Source
		want string
	}{
		{Source{File: "a.yaml", Line: 12}, "a.yaml:12"},
		{Source{File: "dir/b.yml", Line: 1}, "dir/b.yml:1"},
		{Source{File: "a.yaml"}, "a.yaml"},
		{Source{File: StdinName, Line: 3}, "<stdin>:3"},
	}
	for _, tt := range tests {
		if got := tt.src.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.src, got, tt.want)
		}
		var got string
		if b, err := json.Marshal(tt.src); err != nil || json.Unmarshal(b, &got) != nil || got != tt.want {
			t.Errorf("json.Marshal(%#v) = %s, %v; want %q", tt.src, b, err, tt.want)
		}
	}
}

func TestErrorFormatAndUnwrap(t *testing.T) {
	e := &Error{Source: Source{File: "x.yaml", Line: 7}, Msg: "missing kind", Err: ErrInvalidObject}
	if got, want := e.Error(), "x.yaml:7: missing kind"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, ErrInvalidObject) {
		t.Error("errors.Is(e, ErrInvalidObject) = false")
	}
	wrapped := ioError("y.yaml", &fs.PathError{Op: "open", Path: "y.yaml", Err: fs.ErrNotExist})
	if !errors.Is(wrapped, fs.ErrNotExist) {
		t.Error("I/O error does not unwrap to fs.ErrNotExist")
	}
	if got, want := wrapped.Error(), "y.yaml: cannot read: open: file does not exist"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestRelocateYAMLError(t *testing.T) {
	tests := []struct {
		err      string
		offset   int
		wantLine int
		wantMsg  string
	}{
		{"yaml: line 3: could not find expected ':'", 10, 13, "could not find expected ':'"},
		{"yaml: did not find expected node content", 10, 0, "did not find expected node content"},
		{"yaml: unmarshal errors:\n  line 2: key \"a\" already set in map", 4, 6, `key "a" already set in map`},
		{
			"yaml: unmarshal errors:\n  line 2: key \"a\" already set in map\n  line 5: key \"b\" already set in map", 4, 6,
			`unmarshal errors: line 6: key "a" already set in map; line 9: key "b" already set in map`,
		},
	}
	for _, tt := range tests {
		line, msg := relocateYAMLError(errors.New(tt.err), lineMap{first: tt.offset + 1, last: 100})
		if line != tt.wantLine || msg != tt.wantMsg {
			t.Errorf("relocateYAMLError(%q, %d) = %d, %q; want %d, %q", tt.err, tt.offset, line, msg, tt.wantLine, tt.wantMsg)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := map[int64]string{
		0:             "0 bytes",
		1023:          "1023 bytes",
		1024:          "1 KiB",
		1536:          "1.5 KiB",
		16 << 20:      "16 MiB",
		16<<20 + 1:    "16 MiB",
		17 << 20:      "17 MiB",
		5 << 30:       "5 GiB",
		(1 << 50) * 3: "3 PiB",
	}
	for n, want := range tests {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
