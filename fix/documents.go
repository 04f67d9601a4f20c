package fix

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/truce-dev/truce/fix/yamledit"
)

// separator matches a YAML document separator line.
var separator = regexp.MustCompile(`^---(\s.*)?$`)

// removeDocument deletes the document of a multi-document file that holds
// line, with its separator, leaving every other byte as it was. The result
// is checked: it must parse and hold one document less.
func removeDocument(name string, data []byte, line int) ([]byte, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	// starts[i] is the index of the line opening document i (its
	// separator, or 0 for the first).
	starts := []int{0}
	for i, l := range lines {
		if i > 0 && separator.Match(bytes.TrimRight(l, "\r\n")) {
			starts = append(starts, i)
		}
	}
	doc := -1
	for i := range starts {
		if starts[i] <= line-1 {
			doc = i
		}
	}
	if doc < 0 {
		return nil, fmt.Errorf("%s: no document at line %d", name, line)
	}
	from, to := starts[doc], len(lines)
	if doc+1 < len(starts) {
		to = starts[doc+1]
	}
	if doc == 0 && doc+1 < len(starts) {
		// Keep the file starting with a document, not a separator.
		to = starts[1] + 1
	}
	var out []byte
	for i, l := range lines {
		if i < from || i >= to {
			out = append(out, l...)
		}
	}
	before, err := yamledit.Parse(name, data)
	if err != nil {
		return nil, err
	}
	after, err := yamledit.Parse(name, out)
	if err != nil {
		return nil, fmt.Errorf("%s: removing the document at line %d breaks the file: %w", name, line, err)
	}
	if after.Documents() != before.Documents()-1 && !(before.Documents() == 1 && len(bytes.TrimSpace(out)) == 0) {
		return nil, fmt.Errorf("%s: removing the document at line %d did not remove exactly one document", name, line)
	}
	return out, nil
}
