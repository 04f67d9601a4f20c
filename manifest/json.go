package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeJSONStream decodes a stream of concatenated JSON values. It follows
// k8s.io/apimachinery's YAMLOrJSONDecoder: if the first or second value is
// not valid JSON, the rest of the stream, from the end of the last good
// value, is decoded as YAML instead (so `{"a": 1}` followed by YAML documents
// works, and so does a YAML flow mapping such as `{a: 1}`).
func (d *decoder) decodeJSONStream(name string, data []byte) {
	lines := lineCounter{data: data}
	dec := json.NewDecoder(bytes.NewReader(data))
	var end int64
	for count := 0; !d.stopped; count++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if count <= 1 {
				d.decodeYAMLStream(name, data[end:], lines.line(end))
				return
			}
			off := end
			var se *json.SyntaxError
			if errors.As(err, &se) {
				off = se.Offset
			}
			d.fail(newError(Source{File: name, Line: lines.line(off)}, ErrSyntax, "invalid JSON: "+err.Error()))
			return
		}
		start := end
		for start < int64(len(data)) && isJSONSpace(data[start]) {
			start++
		}
		end = dec.InputOffset()
		src := Source{File: name, Line: lines.line(start)}
		if bytes.Equal(raw, []byte("null")) {
			continue // kubectl skips null documents.
		}
		if !d.countDocuments(src, 1) {
			return
		}
		d.guard(src, func() { d.decodeJSONDocument(src, data[start:end], start, &lines) })
	}
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// decodeJSONDocument checks and decodes one JSON value that starts at byte
// offset start of the stream.
func (d *decoder) decodeJSONDocument(src Source, raw []byte, start int64, lines *lineCounter) {
	if raw[0] != '{' {
		var v any
		_ = json.Unmarshal(raw, &v)
		d.fail(newError(src, ErrInvalidObject, fmt.Sprintf(
			"document is %s, not a mapping; a Kubernetes object must be a mapping with apiVersion, kind and metadata",
			describeJSON(v))))
		return
	}
	s, err := scanJSON(raw, d.opts.MaxDepth)
	if err != nil {
		var pe *jsonProblem
		if errors.As(err, &pe) {
			msg := pe.msg
			if pe.firstOffset >= 0 {
				msg += fmt.Sprintf(" (first defined on line %d)", lines.line(start+pe.firstOffset))
			}
			d.fail(newError(Source{File: src.File, Line: lines.line(start + pe.offset)}, pe.kind, msg))
		} else {
			d.fail(newError(src, ErrSyntax, "invalid JSON: "+err.Error()))
		}
		return
	}
	var itemLines []int
	if s.itemOffsets != nil {
		itemLines = make([]int, len(s.itemOffsets))
		for i, off := range s.itemOffsets {
			itemLines[i] = lines.line(start + off)
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		d.fail(newError(src, ErrSyntax, "invalid JSON: "+err.Error()))
		return
	}
	d.emit(src, compact.Bytes(), itemLines)
}

// jsonScan is what scanJSON learns about a document.
type jsonScan struct {
	// itemOffsets are the offsets of the elements of the top-level
	// "items" array, nil if there is none.
	itemOffsets []int64
}

// jsonProblem is a duplicate key or excessive nesting found by scanJSON, at
// a document-relative byte offset.
type jsonProblem struct {
	offset int64
	// firstOffset is where a duplicated key was first defined, or -1.
	firstOffset int64
	kind        error
	msg         string
}

func (p *jsonProblem) Error() string { return p.msg }

// jsonFrame is an open object or array during scanJSON.
type jsonFrame struct {
	object  bool
	wantKey bool
	items   bool             // the top-level "items" array
	keys    map[string]int64 // key -> offset
}

// scanJSON walks the tokens of one JSON value to enforce MaxDepth, to reject
// duplicate object keys (encoding/json silently keeps the last one) and to
// find where the elements of a List's items start.
func scanJSON(raw []byte, maxDepth int) (jsonScan, error) {
	var s jsonScan
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers are only skipped here; don't parse them
	var stack []jsonFrame
	lastTopKey := ""
	// value is called when a value starts at offset off.
	value := func(off int64) {
		if n := len(stack); n == 2 && stack[1].items {
			s.itemOffsets = append(s.itemOffsets, off)
		}
	}
	// done is called when a value ends, to expect the parent's next key.
	done := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, err
		}
		off := dec.InputOffset()
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				value(off - 1)
				if len(stack)+1 > maxDepth {
					return s, &jsonProblem{offset: off - 1, firstOffset: -1, kind: ErrTooDeep,
						msg: fmt.Sprintf("nesting is deeper than %d levels (MaxDepth)", maxDepth)}
				}
				f := jsonFrame{object: tok == '{', wantKey: tok == '{'}
				if tok == '[' && len(stack) == 1 && lastTopKey == "items" {
					f.items = true
					s.itemOffsets = []int64{}
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		default:
			top := len(stack) - 1
			if top >= 0 && stack[top].wantKey {
				key, _ := tok.(string)
				f := &stack[top]
				if f.keys == nil {
					f.keys = make(map[string]int64)
				}
				if first, dup := f.keys[key]; dup {
					return s, &jsonProblem{offset: off, firstOffset: first, kind: ErrDuplicateKey,
						msg: fmt.Sprintf("duplicate key %q", key)}
				}
				f.keys[key] = off
				f.wantKey = false
				if top == 0 {
					lastTopKey = key
				}
				continue
			}
			value(off)
			done()
		}
	}
}

// lineCounter converts byte offsets into 1-based line numbers. Offsets are
// mostly asked for in increasing order, so it counts newlines incrementally
// instead of keeping an index that could be as large as the input.
type lineCounter struct {
	data []byte
	pos  int64
	n    int // newlines in data[:pos]
}

func (c *lineCounter) line(off int64) int {
	off = min(max(off, 0), int64(len(c.data)))
	if off < c.pos {
		c.pos, c.n = 0, 0
	}
	c.n += bytes.Count(c.data[c.pos:off], []byte("\n"))
	c.pos = off
	return c.n + 1
}
