package manifest

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// Source is a position in the input: the file an object or problem came from
// and the 1-based line it starts on.
type Source struct {
	File string
	// Line is 1-based. Zero means the position applies to the file as a
	// whole, e.g. when the file cannot be read at all or when an object
	// rendered by kustomize cannot be traced to one document.
	Line int
	// Kustomization is the kustomization file whose build produced the
	// object, empty for objects read from plain files. File and Line then
	// point at the resource file the object was written in when
	// kustomize's origin tracking allows, else at a generator entry or at
	// the kustomization itself.
	Kustomization string
	// Renderer is what produced the object when a template engine did
	// (a Helm chart, a Jsonnet program), empty otherwise; RenderRoot is
	// the chart directory or the Jsonnet file. File then names the
	// template the object came from and Line is zero: rendered output
	// cannot be traced back to a line of a template.
	Renderer   Renderer
	RenderRoot string
	// Unit is the GitOps unit that applies the object, when the
	// repository was read through its entry points (see package
	// render/world); zero otherwise.
	Unit Unit
}

// Unit names an Argo CD Application, a Flux Kustomization or a Flux
// HelmRelease: what applies an object.
type Unit struct {
	Kind, Namespace, Name string
}

// IsZero reports whether u names no unit.
func (u Unit) IsZero() bool { return u == Unit{} }

func (u Unit) String() string {
	if u.Namespace == "" {
		return u.Kind + " " + u.Name
	}
	return u.Kind + " " + u.Namespace + "/" + u.Name
}

// Renderer names a template engine GitOps tools render sources with.
type Renderer string

// The renderers truce runs, as their users call them.
const (
	RendererHelm    Renderer = "helm chart"
	RendererJsonnet Renderer = "jsonnet"
)

// String formats s as "file:line", the form editors and CI log parsers turn
// into links. A Source without a line is printed as just the file name. An
// object rendered by kustomize is followed by " (kustomization FILE)" when
// that differs from File.
func (s Source) String() string {
	out := s.File
	if s.Line > 0 {
		out += ":" + strconv.Itoa(s.Line)
	}
	if s.Kustomization != "" && s.Kustomization != s.File {
		out += " (kustomization " + s.Kustomization + ")"
	}
	if s.Renderer != "" && s.RenderRoot != s.File {
		out += " (" + string(s.Renderer) + " " + s.RenderRoot + ")"
	}
	return out
}

// MarshalText writes s as String does, so that JSON shows "file:line".
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Error is a problem with one document, list item or file. Every error
// returned by this package is an *Error or an errors.Join of them (plus a
// context error when loading was cancelled), so callers can always point the
// user at the offending line.
type Error struct {
	Source Source
	// Msg describes the problem for a human; it already includes the text
	// of Err when that adds information.
	Msg string
	// Err classifies the problem for errors.Is: one of the Err* sentinels
	// of this package, or an underlying error such as an *fs.PathError.
	Err error
}

// Error returns "file:line: msg".
func (e *Error) Error() string {
	return e.Source.String() + ": " + e.Msg
}

// Unwrap returns the classification or cause of e.
func (e *Error) Unwrap() error {
	return e.Err
}

// Sentinel errors classify an *Error for errors.Is.
var (
	// ErrSyntax means the input is not valid YAML or JSON.
	ErrSyntax = errors.New("syntax error")
	// ErrInvalidObject means a document parsed but is not a usable
	// Kubernetes object (not a mapping, missing apiVersion, kind or name).
	ErrInvalidObject = errors.New("invalid Kubernetes object")
	// ErrDuplicateKey means a mapping defines the same key twice; YAML
	// decoders silently keep one of the values, which hides mistakes.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrTooLarge means a file or stream exceeds Options.MaxFileBytes or
	// the call exceeds Options.MaxTotalBytes.
	ErrTooLarge = errors.New("input too large")
	// ErrTooManyDocuments means the call exceeds Options.MaxDocuments.
	ErrTooManyDocuments = errors.New("too many documents")
	// ErrTooDeep means a document nests deeper than Options.MaxDepth.
	ErrTooDeep = errors.New("nesting too deep")
	// ErrAliasExpansion means YAML aliases expand to more nodes than
	// Options.MaxAliasNodes allows ("billion laughs" protection).
	ErrAliasExpansion = errors.New("excessive alias expansion")
	// ErrInternal means a decoder panicked on the input. It indicates a bug
	// (here or in a YAML library) and is reported instead of crashing the
	// caller.
	ErrInternal = errors.New("internal decoder error")
)

func newError(src Source, kind error, msg string) *Error {
	return &Error{Source: src, Msg: msg, Err: kind}
}

// yamlLineRE matches the "line N" references go-yaml puts in its messages.
var (
	yamlLineRE  = regexp.MustCompile(`\bline (\d+)\b`)
	listStartRE = regexp.MustCompile(`:\n\s*`)
	listNextRE  = regexp.MustCompile(`\n\s*`)
)

// relocateYAMLError turns an error from go-yaml, whose line numbers are
// relative to the "---" section it was given, into a message with line
// numbers relative to the file, using the section's line map. It returns
// the first line the message mentions (or 0) and the rewritten message
// without go-yaml's "yaml: " and leading "line N: " prefixes, because Error
// already prints the position.
func relocateYAMLError(err error, lines lineMap) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	msg = yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, convErr := strconv.Atoi(m[len("line "):])
		if convErr != nil {
			return m
		}
		fileLine := lines.file(n)
		if line == 0 {
			line = fileLine
		}
		return "line " + strconv.Itoa(fileLine)
	})
	if line != 0 {
		msg = strings.TrimPrefix(msg, "line "+strconv.Itoa(line)+": ")
	}
	// go-yaml reports decoding problems as a multi-line list, which reads
	// badly after "file:line: "; a list of one is just its entry.
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n"); ok && !strings.Contains(strings.TrimSpace(rest), "\n") {
		msg = strings.TrimPrefix(strings.TrimSpace(rest), "line "+strconv.Itoa(line)+": ")
	}
	msg = listStartRE.ReplaceAllString(msg, ": ")
	msg = listNextRE.ReplaceAllString(msg, "; ")
	return line, msg
}
