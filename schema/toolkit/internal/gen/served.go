package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// dropUnserved removes the API versions a CRD file marks `served: false`:
// the tool no longer serves them, so truce must not accept objects in them.
// A file without such versions is returned unchanged, byte for byte; one
// with them is re-encoded (same keys, order and comments, standard
// indentation). The names of the dropped versions are returned as
// "plural.group/version".
func dropUnserved(data []byte) ([]byte, []string, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	var dropped []string
	for {
		doc := &yaml.Node{}
		err := dec.Decode(doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("parsing YAML: %w", err)
		}
		d, err := dropFromDocument(doc)
		if err != nil {
			return nil, nil, err
		}
		dropped = append(dropped, d...)
		docs = append(docs, doc)
	}
	if len(dropped) == 0 {
		return data, nil, nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, doc := range docs {
		if err := enc.Encode(doc); err != nil {
			return nil, nil, fmt.Errorf("encoding YAML: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return buf.Bytes(), dropped, nil
}

func dropFromDocument(doc *yaml.Node) ([]string, error) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	name := lookup(lookup(root, "metadata"), "name")
	versions := lookup(lookup(root, "spec"), "versions")
	if versions == nil || versions.Kind != yaml.SequenceNode {
		return nil, nil
	}
	crd := "?"
	if name != nil {
		crd = name.Value
	}
	var kept []*yaml.Node
	var dropped []string
	for _, v := range versions.Content {
		served, err := boolField(v, "served")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd, err)
		}
		if served {
			kept = append(kept, v)
			continue
		}
		storage, err := boolField(v, "storage")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd, err)
		}
		vname := "?"
		if n := lookup(v, "name"); n != nil {
			vname = n.Value
		}
		if storage {
			return nil, fmt.Errorf("%s: storage version %s is not served", crd, vname)
		}
		dropped = append(dropped, crd+"/"+vname)
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s: no version is served", crd)
	}
	versions.Content = kept
	return dropped, nil
}

// boolField reads a boolean field of a mapping; absent is false, as the API
// server defaults it.
func boolField(m *yaml.Node, key string) (bool, error) {
	n := lookup(m, key)
	if n == nil {
		return false, nil
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, fmt.Errorf("field %s at line %d: %w", key, n.Line, err)
	}
	return b, nil
}

// lookup returns the value of key in a mapping node, nil if m is not a
// mapping or has no such key.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
