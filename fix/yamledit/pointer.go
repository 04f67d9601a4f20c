package yamledit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// parsePointer splits an RFC 6901 JSON pointer into unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not start with \"/\"", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: \"~\" must be followed by 0 or 1", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// formatPointer is the inverse of parsePointer.
func formatPointer(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// arrayIndex parses a list index token: "0" or digits without a leading
// zero. It returns -1 if tok is not one.
func arrayIndex(tok string) int {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return -1
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return -1
		}
		n = n*10 + int(tok[i]-'0')
	}
	return n
}

// normalizeValue checks a caller's value and converts it to the JSON data
// model: map[string]any, []any, string, bool, nil, int64 or float64.
func normalizeValue(v any, depth int) (any, error) {
	if depth > 1000 {
		return nil, fmt.Errorf("value nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("string %q is not valid UTF-8", x)
		}
		return x, nil
	case bool:
		return x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint:
		return normUint(uint64(x))
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		return normUint(x)
	case float32:
		return normFloat(float64(x))
	case float64:
		return normFloat(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		fl, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", string(x))
		}
		return normFloat(fl)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("key %q is not valid UTF-8", k)
			}
			n, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) || !utf8.ValidString(e) {
				return nil, fmt.Errorf("map entry %q is not valid UTF-8", k)
			}
			out[k] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value type %T (use string, bool, int64, float64, nil, []any or map[string]any)", v)
}

func normUint(u uint64) (any, error) {
	if u > math.MaxInt64 {
		return nil, fmt.Errorf("integer %d is out of range", u)
	}
	return int64(u), nil
}

func normFloat(f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v cannot be written as JSON", f)
	}
	return f, nil
}

// canon converts decoded data (from encoding/json with UseNumber, from
// yaml.v3, or from normalizeValue) into a form where equal data is
// reflect.DeepEqual: numbers become exact rationals, map keys strings.
func canon(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = canon(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				ks = fmt.Sprintf("%T:%v", k, k)
			}
			out[ks] = canon(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canon(e)
		}
		return out
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			return num(r.RatString())
		}
		return "number:" + string(x)
	case int:
		return num(strconv.Itoa(x))
	case int64:
		return num(strconv.FormatInt(x, 10))
	case uint64:
		return num(strconv.FormatUint(x, 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return num(fmt.Sprint(x))
		}
		return num(new(big.Rat).SetFloat64(x).RatString())
	case time.Time:
		return "time:" + x.Format(time.RFC3339Nano)
	case nil, string, bool:
		return x
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// num is a canonical number.
type num string

func equalData(a, b any) bool { return reflect.DeepEqual(canon(a), canon(b)) }

// decodeJSON decodes JSON the way unstructured.Unstructured does: integers
// as int64, other numbers as float64.
func decodeJSON(js []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return fromNumbers(v), nil
}

func fromNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = fromNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fromNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return string(x)
	}
	return v
}

// build returns the value that Set stores when toks do not exist yet: maps
// for keys and a one-element list for "-".
func build(toks []string, v any) any {
	for i := len(toks) - 1; i >= 0; i-- {
		if toks[i] == "-" {
			v = []any{v}
		} else {
			v = map[string]any{toks[i]: v}
		}
	}
	return v
}

// dataSet applies Set's semantics to decoded data. It returns the new root.
func dataSet(root any, toks []string, v any) (any, error) {
	if len(toks) == 0 {
		return v, nil
	}
	switch x := root.(type) {
	case nil:
		return build(toks, v), nil
	case map[string]any:
		child, ok := x[toks[0]]
		if !ok || child == nil {
			x[toks[0]] = build(toks[1:], v)
			return x, nil
		}
		n, err := dataSet(child, toks[1:], v)
		if err != nil {
			return nil, err
		}
		x[toks[0]] = n
		return x, nil
	case []any:
		if toks[0] == "-" {
			return append(x, build(toks[1:], v)), nil
		}
		i := arrayIndex(toks[0])
		if i < 0 || i >= len(x) {
			return nil, fmt.Errorf("list index %q out of range", toks[0])
		}
		n, err := dataSet(x[i], toks[1:], v)
		if err != nil {
			return nil, err
		}
		x[i] = n
		return x, nil
	}
	return nil, fmt.Errorf("cannot set %q below a scalar", toks[0])
}

// dataRemove applies Remove's semantics to decoded data.
func dataRemove(root any, toks []string) (any, error) {
	if len(toks) == 0 {
		return nil, fmt.Errorf("cannot remove the whole document")
	}
	switch x := root.(type) {
	case map[string]any:
		child, ok := x[toks[0]]
		if !ok {
			return nil, fmt.Errorf("%q not found", toks[0])
		}
		if len(toks) == 1 {
			delete(x, toks[0])
			return x, nil
		}
		n, err := dataRemove(child, toks[1:])
		if err != nil {
			return nil, err
		}
		x[toks[0]] = n
		return x, nil
	case []any:
		i := arrayIndex(toks[0])
		if i < 0 || i >= len(x) {
			return nil, fmt.Errorf("list index %q out of range", toks[0])
		}
		if len(toks) == 1 {
			return append(x[:i:i], x[i+1:]...), nil
		}
		n, err := dataRemove(x[i], toks[1:])
		if err != nil {
			return nil, err
		}
		x[i] = n
		return x, nil
	}
	return nil, fmt.Errorf("%q not found", toks[0])
}

// dataGet looks up toks in decoded data.
func dataGet(root any, toks []string) (any, bool) {
	for _, t := range toks {
		switch x := root.(type) {
		case map[string]any:
			v, ok := x[t]
			if !ok {
				return nil, false
			}
			root = v
		case []any:
			i := arrayIndex(t)
			if i < 0 || i >= len(x) {
				return nil, false
			}
			root = x[i]
		default:
			return nil, false
		}
	}
	return root, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
