package helm

import (
	"encoding/json"
	"fmt"
	"math"

	"helm.sh/helm/v4/pkg/chart/common"
)

// wireNode is one value of a values tree sent to the template worker, in
// preorder: a map or slice node is followed by its L children. gob alone
// would not do: it turns an empty []any into nil and a nil map into an
// empty one, which toYaml prints differently ("[]" and "null").
type wireNode struct {
	K   wireKind
	Key string // the entry's key when the parent is a map
	S   string
	N   uint64 // integers (two's complement), float bits, booleans
	L   int    // children of a map or slice
}

type wireKind uint8

const (
	wNil wireKind = iota
	wBool
	wString
	wNumber // json.Number
	wInt
	wInt8
	wInt16
	wInt32
	wInt64
	wUint
	wUint8
	wUint16
	wUint32
	wUint64
	wFloat32
	wFloat64
	wMap // map[string]any
	wMapNil
	wValues // common.Values
	wValuesNil
	wSlice // []any
	wSliceNil
	wStringMap // map[string]string
	wStringMapNil
	wStrings // []string
	wStringsNil
)

// maxWireDepth bounds the nesting of a values tree; the YAML decoders
// stop far earlier.
const maxWireDepth = 10_000

// encodeValues flattens v. A type outside what values files, --set and
// Helm's render values hold is an error: the caller renders in process.
func encodeValues(v any) ([]wireNode, error) {
	return appendValue(nil, "", v, 0)
}

func appendValue(nodes []wireNode, key string, v any, depth int) ([]wireNode, error) {
	if depth > maxWireDepth {
		return nil, fmt.Errorf("values nested deeper than %d levels", maxWireDepth)
	}
	n := wireNode{Key: key}
	var err error
	switch x := v.(type) {
	case nil:
		n.K = wNil
	case bool:
		n.K = wBool
		if x {
			n.N = 1
		}
	case string:
		n.K, n.S = wString, x
	case json.Number:
		n.K, n.S = wNumber, string(x)
	case int:
		n.K, n.N = wInt, uint64(x)
	case int8:
		n.K, n.N = wInt8, uint64(x)
	case int16:
		n.K, n.N = wInt16, uint64(x)
	case int32:
		n.K, n.N = wInt32, uint64(x)
	case int64:
		n.K, n.N = wInt64, uint64(x)
	case uint:
		n.K, n.N = wUint, uint64(x)
	case uint8:
		n.K, n.N = wUint8, uint64(x)
	case uint16:
		n.K, n.N = wUint16, uint64(x)
	case uint32:
		n.K, n.N = wUint32, uint64(x)
	case uint64:
		n.K, n.N = wUint64, x
	case float32:
		n.K, n.N = wFloat32, uint64(math.Float32bits(x))
	case float64:
		n.K, n.N = wFloat64, math.Float64bits(x)
	case map[string]any:
		if x == nil {
			n.K = wMapNil
			break
		}
		n.K, n.L = wMap, len(x)
		nodes = append(nodes, n)
		for k, e := range x {
			if nodes, err = appendValue(nodes, k, e, depth+1); err != nil {
				return nil, err
			}
		}
		return nodes, nil
	case common.Values:
		if x == nil {
			n.K = wValuesNil
			break
		}
		n.K, n.L = wValues, len(x)
		nodes = append(nodes, n)
		for k, e := range x {
			if nodes, err = appendValue(nodes, k, e, depth+1); err != nil {
				return nil, err
			}
		}
		return nodes, nil
	case []any:
		if x == nil {
			n.K = wSliceNil
			break
		}
		n.K, n.L = wSlice, len(x)
		nodes = append(nodes, n)
		for _, e := range x {
			if nodes, err = appendValue(nodes, "", e, depth+1); err != nil {
				return nil, err
			}
		}
		return nodes, nil
	case map[string]string:
		if x == nil {
			n.K = wStringMapNil
			break
		}
		n.K, n.L = wStringMap, len(x)
		nodes = append(nodes, n)
		for k, e := range x {
			nodes = append(nodes, wireNode{K: wString, Key: k, S: e})
		}
		return nodes, nil
	case []string:
		if x == nil {
			n.K = wStringsNil
			break
		}
		n.K, n.L = wStrings, len(x)
		nodes = append(nodes, n)
		for _, e := range x {
			nodes = append(nodes, wireNode{K: wString, S: e})
		}
		return nodes, nil
	default:
		return nil, fmt.Errorf("values hold a %T, which the template worker does not take", v)
	}
	return append(nodes, n), nil
}

// decodeValues rebuilds what encodeValues flattened.
func decodeValues(nodes []wireNode) (any, error) {
	d := valueDecoder{nodes: nodes}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.i != len(nodes) {
		return nil, fmt.Errorf("malformed values: %d nodes left over", len(nodes)-d.i)
	}
	return v, nil
}

type valueDecoder struct {
	nodes []wireNode
	i     int
}

func (d *valueDecoder) value(depth int) (any, error) {
	if depth > maxWireDepth {
		return nil, fmt.Errorf("malformed values: nested deeper than %d levels", maxWireDepth)
	}
	if d.i >= len(d.nodes) {
		return nil, fmt.Errorf("malformed values: truncated")
	}
	n := d.nodes[d.i]
	d.i++
	// Every child takes a node, so L cannot exceed what is left.
	if n.L < 0 || n.L > len(d.nodes)-d.i {
		return nil, fmt.Errorf("malformed values: %d children, %d nodes left", n.L, len(d.nodes)-d.i)
	}
	switch n.K {
	case wNil:
		return nil, nil
	case wBool:
		return n.N == 1, nil
	case wString:
		return n.S, nil
	case wNumber:
		return json.Number(n.S), nil
	case wInt:
		return int(n.N), nil
	case wInt8:
		return int8(n.N), nil
	case wInt16:
		return int16(n.N), nil
	case wInt32:
		return int32(n.N), nil
	case wInt64:
		return int64(n.N), nil
	case wUint:
		return uint(n.N), nil
	case wUint8:
		return uint8(n.N), nil
	case wUint16:
		return uint16(n.N), nil
	case wUint32:
		return uint32(n.N), nil
	case wUint64:
		return n.N, nil
	case wFloat32:
		return math.Float32frombits(uint32(n.N)), nil
	case wFloat64:
		return math.Float64frombits(n.N), nil
	case wMapNil:
		return map[string]any(nil), nil
	case wValuesNil:
		return common.Values(nil), nil
	case wSliceNil:
		return []any(nil), nil
	case wStringMapNil:
		return map[string]string(nil), nil
	case wStringsNil:
		return []string(nil), nil
	case wMap, wValues:
		m := make(map[string]any, n.L)
		for range n.L {
			key := d.peekKey()
			e, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[key] = e
		}
		if n.K == wValues {
			return common.Values(m), nil
		}
		return m, nil
	case wSlice:
		s := make([]any, n.L)
		for j := range s {
			e, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			s[j] = e
		}
		return s, nil
	case wStringMap:
		m := make(map[string]string, n.L)
		for range n.L {
			c, err := d.stringNode()
			if err != nil {
				return nil, err
			}
			m[c.Key] = c.S
		}
		return m, nil
	case wStrings:
		s := make([]string, n.L)
		for j := range s {
			c, err := d.stringNode()
			if err != nil {
				return nil, err
			}
			s[j] = c.S
		}
		return s, nil
	default:
		return nil, fmt.Errorf("malformed values: kind %d", n.K)
	}
}

// stringNode consumes the next node, which must be a string; the caller
// checked that it exists.
func (d *valueDecoder) stringNode() (wireNode, error) {
	c := d.nodes[d.i]
	d.i++
	if c.K != wString {
		return c, fmt.Errorf("malformed values: kind %d in a string map or list", c.K)
	}
	return c, nil
}

// peekKey is the key of the next node, which value consumes.
func (d *valueDecoder) peekKey() string {
	if d.i < len(d.nodes) {
		return d.nodes[d.i].Key
	}
	return ""
}
