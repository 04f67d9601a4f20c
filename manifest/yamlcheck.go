package manifest

import (
	"fmt"

	yaml3 "go.yaml.in/yaml/v3"
)

// nodeChecker inspects a yaml.v3 node tree before the document is decoded
// for real. The tree shares aliased nodes instead of copying them, so the
// checker can compute what decoding would produce (expanded size, nesting
// depth) in time linear in the input, and refuse before the expensive
// expansion happens.
type nodeChecker struct {
	maxDepth      int
	maxAliasNodes int
	// aliasLeft is the remaining alias expansion budget; it is shared by
	// all documents of a call.
	aliasLeft int
	// lines converts the tree's section-relative lines to file lines in
	// messages.
	lines lineMap

	// stats memoizes anchored nodes so that every alias is O(1).
	stats map[*yaml3.Node]nodeStats
	// active holds anchored nodes whose measurement is in progress; an
	// alias to one of them is a cycle.
	active map[*yaml3.Node]bool

	problem *nodeProblem
	// skipDuplicateKeys turns the duplicate key check off, for input
	// whose duplicate keys are another parser's business.
	skipDuplicateKeys bool
	// sawMerge records a merge key ("<<") anywhere in the document.
	sawMerge bool
}

type nodeStats struct {
	// size is the number of nodes after alias expansion.
	size int
	// height is the number of nested mappings and sequences, 0 for a
	// scalar.
	height int
}

// nodeProblem is the first problem found; line is section-relative.
type nodeProblem struct {
	line int
	kind error
	msg  string
}

func (c *nodeChecker) fail(line int, kind error, msg string) {
	if c.problem == nil {
		c.problem = &nodeProblem{line: line, kind: kind, msg: msg}
	}
}

// measure returns the expanded size and height of n, which sits inside
// depth collections, recording the first problem in c.problem.
func (c *nodeChecker) measure(n *yaml3.Node, depth int) nodeStats {
	if c.problem != nil {
		return nodeStats{}
	}
	if n.Kind == yaml3.AliasNode {
		return c.measureAlias(n, depth)
	}
	if n.Anchor != "" {
		if st, ok := c.stats[n]; ok {
			return st
		}
		if c.active == nil {
			c.active = make(map[*yaml3.Node]bool)
			c.stats = make(map[*yaml3.Node]nodeStats)
		}
		c.active[n] = true
		defer delete(c.active, n)
	}

	st := nodeStats{size: 1}
	switch n.Kind {
	case yaml3.MappingNode, yaml3.SequenceNode:
		if depth+1 > c.maxDepth {
			c.fail(n.Line, ErrTooDeep, fmt.Sprintf("nesting is deeper than %d levels (MaxDepth)", c.maxDepth))
			return nodeStats{}
		}
		if n.Kind == yaml3.MappingNode && !c.skipDuplicateKeys {
			c.checkDuplicateKeys(n)
		}
		for _, child := range n.Content {
			cs := c.measure(child, depth+1)
			if c.problem != nil {
				return nodeStats{}
			}
			st.size += cs.size
			st.height = max(st.height, cs.height)
		}
		st.height++
	case yaml3.DocumentNode:
		for _, child := range n.Content {
			cs := c.measure(child, depth)
			st.size += cs.size
			st.height = max(st.height, cs.height)
		}
	}
	if n.Anchor != "" && c.problem == nil {
		c.stats[n] = st
	}
	return st
}

func (c *nodeChecker) measureAlias(n *yaml3.Node, depth int) nodeStats {
	target := n.Alias
	if target == nil {
		c.fail(n.Line, ErrSyntax, fmt.Sprintf("alias *%s refers to an unknown anchor", n.Value))
		return nodeStats{}
	}
	if c.active[target] {
		c.fail(n.Line, ErrSyntax, fmt.Sprintf("alias *%s refers to a node that contains it, which would expand forever", n.Value))
		return nodeStats{}
	}
	st, ok := c.stats[target]
	if !ok {
		// Anchors precede their aliases and are measured in document
		// order, so this only happens for trees not built by the parser;
		// measure the target on its own.
		st = c.measure(target, 0)
		if c.problem != nil {
			return nodeStats{}
		}
	}
	if depth+st.height > c.maxDepth {
		c.fail(n.Line, ErrTooDeep, fmt.Sprintf(
			"alias *%s expands to nesting deeper than %d levels (MaxDepth)", n.Value, c.maxDepth))
		return nodeStats{}
	}
	c.aliasLeft -= st.size
	if c.aliasLeft < 0 {
		c.fail(n.Line, ErrAliasExpansion, fmt.Sprintf(
			"YAML aliases expand to more than %d nodes (MaxAliasNodes); refusing what looks like an alias bomb",
			c.maxAliasNodes))
		return nodeStats{}
	}
	return st
}

// checkDuplicateKeys reports a key that appears twice in mapping n. Keys are
// compared by their text, like yaml.v3 does, so "1" and 1 collide: they
// become the same JSON key and one value would silently be lost.
func (c *nodeChecker) checkDuplicateKeys(n *yaml3.Node) {
	pairs := len(n.Content) / 2
	var seen map[string]int
	if pairs > 8 {
		seen = make(map[string]int, pairs)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, ok := scalarKey(n.Content[i])
		if !ok {
			c.sawMerge = true
			continue
		}
		first := 0
		if seen != nil {
			first = seen[key.Value]
			if first == 0 {
				seen[key.Value] = n.Content[i].Line
			}
		} else {
			for j := 0; j < i; j += 2 {
				if prev, ok := scalarKey(n.Content[j]); ok && prev.Value == key.Value {
					first = n.Content[j].Line
					break
				}
			}
		}
		if first != 0 {
			c.fail(n.Content[i].Line, ErrDuplicateKey, fmt.Sprintf(
				"duplicate key %q (first defined on line %d)", key.Value, c.lines.file(first)))
			return
		}
	}
}

// scalarKey resolves a mapping key to the scalar it denotes, skipping merge
// keys ("<<"), which may legitimately repeat and be overridden.
func scalarKey(k *yaml3.Node) (*yaml3.Node, bool) {
	if k.Kind == yaml3.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml3.ScalarNode {
		return nil, false
	}
	if k.Value == "<<" && k.ShortTag() == "!!merge" {
		return nil, false
	}
	return k, true
}

// itemLines returns the file line of every element of the top-level
// "items" sequence of root, or nil if there is no such sequence. It is only
// consulted when the decoded object turns out to be a List.
func itemLines(root *yaml3.Node, lines lineMap) []int {
	for i := len(root.Content) - 2; i >= 0; i -= 2 {
		key, ok := scalarKey(root.Content[i])
		if !ok || key.Value != "items" {
			continue
		}
		v := root.Content[i+1]
		if v.Kind == yaml3.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind != yaml3.SequenceNode {
			return nil
		}
		out := make([]int, len(v.Content))
		for j, item := range v.Content {
			out[j] = lines.file(item.Line)
		}
		return out
	}
	return nil
}
