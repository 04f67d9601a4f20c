// Package yamledit edits YAML manifests in place, changing only the bytes
// an edit must change.
//
// `truce fix` writes fixes into the files users keep in Git: "put the
// mutation in Git" sets spec.template.spec.containers[0].image in one
// document of a multi-document file, an ignore rule appends to an
// Application's syncOptions, an annotation goes into a missing
// metadata.annotations map. Those files are reviewed as pull requests, so
// the diff must be the change and nothing else.
//
// # Why byte-level edits
//
// Decoding a document into a yaml.v3 node tree and encoding it again is
// the obvious way to edit YAML, and it is not good enough: the encoder drops
// blank lines, re-indents (sequences under keys, four-space files), reflows
// long strings and flow collections, moves or loses comments, normalises
// quoting and rewrites "---" separators and comments between documents. A
// one-line fix would become a diff of the whole file.
//
// So yamledit parses only to learn positions. yaml.v3 reports where every
// node starts (line and column); yamledit finds where it ends by scanning
// the source from there (quoted, plain, multi-line and block scalars, flow
// collections, the last descendant of block collections). An edit is then a
// replacement of a byte range: a scalar's text, an entry's lines, or new
// lines inserted after a mapping's or list's last entry at the indentation
// its siblings use. Flow collections ({app: web}, ["a", "b"]) are edited in
// flow style; JSON files stay JSON. New text copies the document's style:
// indentation step, whether lists are indented under their key, the column
// after "-", CRLF or LF, the quoting of the value being replaced or of its
// siblings. Maps set over maps (and lists over lists) are merged entry by
// entry, so unchanged entries keep their bytes.
//
// # Verification
//
// Scanning YAML by hand is easy to get subtly wrong, so no edit is trusted:
// after every change the document is parsed again and decoded twice, the way
// kubectl decodes it (sigs.k8s.io/yaml, YAML 1.1 scalars such as `yes` and
// `0755`) and as YAML 1.2 (yaml.v3), and both must equal the original data
// with the change applied. Strings are quoted when either decoder would
// read them as something else. An edit that fails the check is refused with
// an ErrUnsupported error and the file is left as it was, so a caller can
// fall back to another kind of fix (for example a kustomize patch, see
// StrategicPatch and AddKustomizePatch) instead of writing something wrong.
//
// # Documents and hostile input
//
// Documents are split like kubectl splits a stream (at lines starting with
// "---"), so DocumentAt maps the file:line of a manifest.Source to a
// document. Files larger than MaxFileBytes, non-UTF-8 input and invalid
// YAML are rejected with errors that name file:line. Documents with anchors,
// aliases or merge keys are neither read nor edited (an alias bomb is never
// expanded); nor are documents whose keys kubectl and YAML 1.2 read
// differently, or with line breaks other than LF and CRLF. Other documents
// of the same file stay editable. No input makes the package panic: the
// parsers are run under recover and the editor is fuzzed (FuzzSet,
// FuzzRemove).
package yamledit
