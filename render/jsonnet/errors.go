package jsonnet

import (
	"fmt"
	"strings"

	gojsonnet "github.com/google/go-jsonnet"
	"github.com/google/go-jsonnet/ast"

	"github.com/truce-dev/truce/manifest"
)

// maxCallers bounds the callers listed in an error message; go-jsonnet's
// own traces of a runaway recursion are hundreds of frames long.
const maxCallers = 5

// evaluationError turns a go-jsonnet failure into an *manifest.Error at the
// file and line it happened: raw is the structured error go-jsonnet
// formatted (a RuntimeError or a static error with a location), formatted
// what it returned.
func evaluationError(src manifest.Source, raw, formatted error, display func(string) string) *manifest.Error {
	e := fileError(src, ErrEvaluation, strings.TrimSpace(formatted.Error()))
	switch r := raw.(type) {
	case gojsonnet.RuntimeError:
		e.Msg = r.Msg
		// StackTrace lists the outermost frame first.
		var callers []string
		located := false
		for i := len(r.StackTrace) - 1; i >= 0; i-- {
			loc := r.StackTrace[i].Loc
			if !loc.IsSet() {
				continue
			}
			if !located {
				e.Source.File, e.Source.Line = display(locFile(loc)), loc.Begin.Line
				located = true
				continue
			}
			at := fmt.Sprintf("%s:%d", display(locFile(loc)), loc.Begin.Line)
			if n := len(callers); n > 0 && callers[n-1] == at {
				continue // a recursion: once is enough
			}
			if len(callers) == maxCallers {
				callers = append(callers, "...")
				break
			}
			callers = append(callers, at)
		}
		if len(callers) > 0 {
			e.Msg += " (called from " + strings.Join(callers, ", ") + ")"
		}
		if strings.Contains(r.Msg, "max stack frames exceeded") {
			e.Msg += fmt.Sprintf("; the program recurses deeper than %d calls, probably without end", MaxStack)
		}
	case interface{ Loc() ast.LocationRange }: // a static (syntax or analysis) error
		loc := r.Loc()
		msg := raw.Error()
		if loc.IsSet() {
			msg = strings.TrimPrefix(msg, loc.String()+" ")
			e.Source.File, e.Source.Line = display(locFile(loc)), loc.Begin.Line
		}
		e.Msg = strings.TrimSpace(msg)
	}
	return e
}

// locFile names the file of loc: the imported path, or go-jsonnet's name
// for code that is not in a file, such as <top-level-arg:name>.
func locFile(loc ast.LocationRange) string {
	if loc.FileName == "" && loc.File != nil {
		return string(loc.File.DiagnosticFileName)
	}
	return loc.FileName
}
