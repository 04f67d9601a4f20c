package manifest

import (
	"context"
	"io"
)

// Default limits. They are far above what real manifests need (the API
// server refuses objects larger than a few MiB anyway) and low enough that a
// hostile or accidental input fails fast instead of exhausting memory.
//
// DefaultMaxDocuments fits a platform monorepo after rendering: a decoded
// object keeps about 3.7 KiB (BenchmarkRetained), and truce diff of small
// Deployments and ConfigMaps peaked at 0.9 GiB for 20,000 objects, about
// 38 KiB an object over a 160 MiB base, so 50,000 objects need about
// 2 GiB; truce check, which simulates each object, needs about 115 KiB an
// object (0.7 GiB for 5,000), about 6 GiB at the limit (docs/sources.md).
const (
	DefaultMaxFileBytes  = 16 << 20
	DefaultMaxTotalBytes = 256 << 20
	DefaultMaxDocuments  = 50000
	DefaultMaxDepth      = 100
	DefaultMaxAliasNodes = 1_000_000
)

// StdinName is the file name reported in Sources of objects read from
// Options.Stdin because "-" was passed to LoadPaths.
const StdinName = "<stdin>"

// Options bounds the work a single LoadPaths or Decode call may do. Limits
// apply per call, not per process. A zero (or negative) limit selects the
// corresponding default, so Options{} behaves like DefaultOptions().
type Options struct {
	// MaxFileBytes caps the size of every file or stream. Regular files
	// are checked before they are read. It is also the memory knob: the
	// YAML libraries need transient memory of roughly 100 bytes per input
	// byte in the worst case (one huge, flat document), so callers such
	// as admission webhooks, whose objects are at most a few MiB, should
	// lower it.
	MaxFileBytes int64
	// MaxTotalBytes caps the bytes read by one call over all files, so a
	// directory of many medium-sized files cannot add up to gigabytes.
	MaxTotalBytes int64
	// MaxDocuments caps the number of non-empty documents plus List items
	// in one call. Empty and comment-only documents are free.
	MaxDocuments int
	// MaxDepth caps how deeply mappings and sequences may nest, counting
	// the document's top-level mapping as depth 1 and following aliases.
	MaxDepth int
	// MaxAliasNodes caps the number of YAML nodes that alias references
	// (*name) may expand to, summed over all documents of a call. This is
	// the guard against "billion laughs" documents, which are tiny on
	// disk but expand exponentially when decoded.
	MaxAliasNodes int
	// RepositoryRoot bounds what loading a directory from disk may read:
	// symlinks and kustomize references that lead outside it are refused
	// with ErrOutsideRoot. Empty means the top of the Git work tree that
	// contains the directory, or the directory itself when it is not in a
	// work tree. Files named explicitly are read wherever they are.
	RepositoryRoot string
	// LimitNames name MaxFileBytes, MaxTotalBytes and MaxDocuments as the
	// caller's users set them (a command's flags), so that the error a
	// limit gives says how to raise it.
	LimitNames LimitNames
	// Stdin is read when LoadPaths is given the path "-". A nil Stdin
	// makes "-" an error rather than silently reading os.Stdin, so that
	// library callers decide explicitly.
	Stdin io.Reader
	// Memo, when set, remembers what each "---" section decoded to, so
	// that decoding a file again with a few sections changed parses only
	// those; results do not change.
	Memo *Memo
	// Chart, when set, renders a directory holding a Chart.yaml that a
	// walk reaches below a directory given, instead of reading the chart's
	// files: its templates are Helm's, not manifests, and its values files
	// are not objects. dir is the directory as the user sees it (relative
	// to the path given). A kustomization next to the Chart.yaml wins, as
	// it does for Argo CD. Only directories on disk are rendered; nil
	// reads a chart's files like any others, as kubectl apply -R does.
	Chart func(ctx context.Context, dir string) ([]Object, error)
}

// DefaultOptions returns the default limits: 16 MiB per file, 256 MiB per
// call, 50000 documents, nesting depth 100 and one million alias-expanded
// nodes.
func DefaultOptions() Options {
	return Options{
		MaxFileBytes:  DefaultMaxFileBytes,
		MaxTotalBytes: DefaultMaxTotalBytes,
		MaxDocuments:  DefaultMaxDocuments,
		MaxDepth:      DefaultMaxDepth,
		MaxAliasNodes: DefaultMaxAliasNodes,
	}
}

// withDefaults fills unset limits so that the rest of the package can rely
// on every limit being positive.
func (o Options) withDefaults() Options {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxTotalBytes <= 0 {
		o.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if o.MaxDocuments <= 0 {
		o.MaxDocuments = DefaultMaxDocuments
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxAliasNodes <= 0 {
		o.MaxAliasNodes = DefaultMaxAliasNodes
	}
	return o
}

// LimitNames are the caller's names of the limits, such as
// "--max-documents"; an empty name is the Options field's.
type LimitNames struct {
	FileBytes, TotalBytes, Documents string
}

// LimitHint is what an error says about the limit named by its Options
// field ("MaxDocuments"): how to raise it by the caller's name for it, or
// the field.
func (o Options) LimitHint(field string) string {
	name := map[string]string{
		"MaxFileBytes":  o.LimitNames.FileBytes,
		"MaxTotalBytes": o.LimitNames.TotalBytes,
		"MaxDocuments":  o.LimitNames.Documents,
	}[field]
	if name == "" {
		return field
	}
	return "raise it with " + name
}
