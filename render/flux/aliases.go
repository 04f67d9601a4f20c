package flux

import (
	"bytes"
	"errors"
	"fmt"

	yaml3 "go.yaml.in/yaml/v3"

	"github.com/truce-dev/truce/manifest"
)

// checkAliases refuses YAML whose aliases expand to more than maxNodes
// nodes: kustomize expands them all in memory ("billion laughs"), and so
// would kustomize-controller. The node API used here never expands them.
// Content that is not YAML passes: kustomize reports it.
func checkAliases(name string, data []byte, maxNodes int) (err error) {
	if !bytes.Contains(data, []byte("*")) || !bytes.Contains(data, []byte("&")) {
		return nil // no alias without an anchor
	}
	defer func() {
		if recover() != nil {
			err = nil // the YAML parser's problem; kustomize reports it
		}
	}()
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	sizes := map[*yaml3.Node]int{}
	total := 0
	for {
		var doc yaml3.Node
		if dec.Decode(&doc) != nil {
			return nil
		}
		total += expanded(&doc, sizes, maxNodes)
		if total > maxNodes {
			return fmt.Errorf("%s: YAML aliases expand to more than %d nodes (MaxAliasNodes): %w",
				name, maxNodes, errAliasBomb)
		}
	}
}

// errAliasBomb classifies refusals of alias bombs.
var errAliasBomb = errors.New("excessive alias expansion")

// expanded counts the nodes n stands for with aliases expanded, memoised
// per node and capped just past limit so that counting stays cheap.
func expanded(n *yaml3.Node, sizes map[*yaml3.Node]int, limit int) int {
	if s, ok := sizes[n]; ok {
		return s
	}
	sizes[n] = limit + 1 // a cycle counts as too many
	s := 1
	if n.Kind == yaml3.AliasNode && n.Alias != nil {
		s = expanded(n.Alias, sizes, limit)
	}
	for _, c := range n.Content {
		if s += expanded(c, sizes, limit); s > limit {
			s = limit + 1
			break
		}
	}
	sizes[n] = s
	return s
}

func maxAliasNodes(o manifest.Options) int {
	if o.MaxAliasNodes > 0 {
		return o.MaxAliasNodes
	}
	return manifest.DefaultMaxAliasNodes
}
