package ignore

import (
	"fmt"
	"strings"
)

// ParsePointer splits an RFC 6901 JSON pointer into its unescaped reference
// tokens. The empty pointer "" refers to the whole document and yields no
// tokens. Any other pointer must start with "/", and "~" must be followed by
// "0" (for "~") or "1" (for "/").
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q must start with \"/\"", p)
	}
	raw := strings.Split(p[1:], "/")
	tokens := make([]string, len(raw))
	for i, r := range raw {
		t, err := unescapeToken(r)
		if err != nil {
			return nil, fmt.Errorf("JSON pointer %q: %w", p, err)
		}
		tokens[i] = t
	}
	return tokens, nil
}

func unescapeToken(s string) (string, error) {
	if !strings.Contains(s, "~") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '~' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) || (s[i+1] != '0' && s[i+1] != '1') {
			return "", fmt.Errorf("token %q: \"~\" must be written \"~0\" (and \"/\" as \"~1\")", s)
		}
		if s[i+1] == '0' {
			b.WriteByte('~')
		} else {
			b.WriteByte('/')
		}
		i++
	}
	return b.String(), nil
}

// FormatPointer is the inverse of ParsePointer: it escapes "~" as "~0" and
// "/" as "~1" in each token and joins them.
func FormatPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapeToken(t string) string { return tokenEscaper.Replace(t) }

// hasPrefix reports whether prefix is a leading run of tokens of p.
func hasPrefix(p, prefix []string) bool {
	if len(prefix) > len(p) {
		return false
	}
	for i := range prefix {
		if p[i] != prefix[i] {
			return false
		}
	}
	return true
}
