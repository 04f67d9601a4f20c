package yamledit

import (
	"errors"
	"fmt"
)

// The kinds of error this package returns; test with errors.Is.
var (
	// ErrTooLarge: the input is larger than MaxFileBytes.
	ErrTooLarge = errors.New("file too large")
	// ErrSyntax: the file is not YAML this package can read (invalid YAML
	// or UTF-8, a "---" line kubectl would reject).
	ErrSyntax = errors.New("invalid YAML")
	// ErrNotFound: the pointer names nothing in the document.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the pointer or value is malformed, or does not fit the
	// document (an index out of range, a key below a scalar).
	ErrInvalid = errors.New("invalid edit")
	// ErrUnsupported: the edit cannot be made safely as a byte-level edit
	// (aliases, unusual line breaks, YAML constructs the editor does not
	// handle), or the edited text did not decode to the expected data. The
	// file is left unchanged; callers can fall back to another kind of fix.
	ErrUnsupported = errors.New("cannot edit safely")
)

// Error is an error about a position in a file.
type Error struct {
	File string
	Line int // 1-based; 0 when the error is about the whole file
	Msg  string
	Kind error // one of the Err* values
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns the kind, so that errors.Is(err, ErrNotFound) works.
func (e *Error) Unwrap() error { return e.Kind }

// editError is an error raised while editing one section, with a line
// relative to the section; the File turns it into an *Error.
type editError struct {
	line int // 1-based line within the section, 0 if unknown
	kind error
	msg  string
}

func (e *editError) Error() string { return e.msg }

func errAt(line int, kind error, format string, args ...any) *editError {
	return &editError{line: line, kind: kind, msg: fmt.Sprintf(format, args...)}
}
