package manifest

import "io"

// Default limits. They are far above what real manifests need (the API
// server refuses objects larger than a few MiB anyway) and low enough that a
// hostile or accidental input fails fast instead of exhausting memory.
const (
	DefaultMaxFileBytes  = 16 << 20
	DefaultMaxTotalBytes = 256 << 20
	DefaultMaxDocuments  = 10000
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
	// Stdin is read when LoadPaths is given the path "-". A nil Stdin
	// makes "-" an error rather than silently reading os.Stdin, so that
	// library callers decide explicitly.
	Stdin io.Reader
}

// DefaultOptions returns the default limits: 16 MiB per file, 256 MiB per
// call, 10000 documents, nesting depth 100 and one million alias-expanded
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
