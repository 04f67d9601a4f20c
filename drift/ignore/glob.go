package ignore

import (
	"fmt"
	"regexp"
	"strings"
)

// compileGlob translates a glob in the syntax of github.com/gobwas/glob,
// which Argo CD uses (without separators) to match ignoreDifferences groups
// and kinds, into an anchored regular expression: "*" and "**" match any
// run of characters, "?" one character, "[abc]", "[a-z]" and "[!abc]" a
// class, "{a,b}" alternatives, and "\" escapes the next character. An empty
// pattern matches only the empty string, as it does in Argo CD.
func compileGlob(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	depth := 0 // nesting of {...}
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			b.WriteString(`.*`)
			for i+1 < len(rs) && rs[i+1] == '*' {
				i++
			}
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i+1 >= len(rs) {
				return nil, fmt.Errorf("glob %q ends with an unfinished escape", pattern)
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case '{':
			depth++
			b.WriteString(`(?:`)
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("glob %q has an unmatched \"}\"", pattern)
			}
			depth--
			b.WriteString(`)`)
		case ',':
			if depth > 0 {
				b.WriteString(`|`)
			} else {
				b.WriteString(`,`)
			}
		case '[':
			end := i + 1
			for end < len(rs) && rs[end] != ']' {
				end++
			}
			if end >= len(rs) {
				return nil, fmt.Errorf("glob %q has an unterminated \"[\"", pattern)
			}
			class := rs[i+1 : end]
			b.WriteByte('[')
			if len(class) > 0 && class[0] == '!' {
				b.WriteByte('^')
				class = class[1:]
			}
			if len(class) == 0 {
				return nil, fmt.Errorf("glob %q has an empty character class", pattern)
			}
			for j := 0; j < len(class); j++ {
				if j+2 < len(class) && class[j+1] == '-' {
					if class[j] > class[j+2] {
						return nil, fmt.Errorf("glob %q has an invalid range %c-%c", pattern, class[j], class[j+2])
					}
					b.WriteString(classChar(class[j]) + "-" + classChar(class[j+2]))
					j += 2
					continue
				}
				b.WriteString(classChar(class[j]))
			}
			b.WriteByte(']')
			i = end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("glob %q has an unterminated \"{\"", pattern)
	}
	b.WriteString(`)$`)
	return regexp.Compile(b.String())
}

func classChar(r rune) string {
	switch r {
	case '\\', ']', '[', '^', '-':
		return `\` + string(r)
	}
	return string(r)
}
