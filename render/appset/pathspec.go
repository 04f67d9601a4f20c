package appset

import "strings"

// pathspecMatch reports whether the file name (slash-separated, from the
// repository root) matches a git files generator path as
// `git ls-files -- PATH` does, which is how Argo CD's repo-server lists
// them by default (git.nativeGitClient.LsFiles without the new
// globbing): a path without wildcards names that file or everything
// under that directory; with wildcards it is matched whole by git's
// wildmatch without WM_PATHNAME, so "*" and "?" match "/" too and "**"
// is "*".
func pathspecMatch(pattern, name string) bool {
	pattern = strings.TrimPrefix(pattern, "./")
	if pattern == "" || pattern == "." {
		return true
	}
	if !strings.ContainsAny(pattern, `*?[\`) {
		dir := strings.TrimSuffix(pattern, "/")
		return name == pattern || strings.HasPrefix(name, dir+"/")
	}
	return wildmatch(pattern, name)
}

// wildmatch matches s against a shell pattern whose "*" matches any
// string: the two-pointer walk backtracking to the last star.
func wildmatch(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				star, mark = pi, si
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if n, ok, valid := matchClass(p[pi:], s[si]); valid {
					if ok {
						pi += n
						si++
						continue
					}
				} else if s[si] == '[' { // an unclosed [ is itself
					pi++
					si++
					continue
				}
			case '\\':
				if pi+1 < len(p) && p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		mark++
		pi, si = star, mark
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the bracket expression that p starts
// with; n is the expression's length, valid false when it is not closed.
func matchClass(p string, c byte) (n int, ok, valid bool) {
	i := 1
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate = true
		i++
	}
	first := true
	for i < len(p) {
		if p[i] == ']' && !first {
			return i + 1, ok != negate, true
		}
		first = false
		if p[i] == '[' && i+1 < len(p) && p[i+1] == ':' {
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				if inClass(p[i+2:i+2+end], c) {
					ok = true
				}
				i += end + 4
				continue
			}
		}
		lo := p[i]
		if lo == '\\' && i+1 < len(p) {
			i++
			lo = p[i]
		}
		hi := lo
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi = p[i+2]
			if hi == '\\' && i+3 < len(p) {
				i++
				hi = p[i+2]
			}
			i += 2
		}
		if lo <= c && c <= hi {
			ok = true
		}
		i++
	}
	return 0, false, false
}

func inClass(class string, c byte) bool {
	switch class {
	case "alnum":
		return isAlpha(c) || isDigit(c)
	case "alpha":
		return isAlpha(c)
	case "digit":
		return isDigit(c)
	case "lower":
		return 'a' <= c && c <= 'z'
	case "upper":
		return 'A' <= c && c <= 'Z'
	case "space":
		return strings.IndexByte(" \t\n\r\f\v", c) >= 0
	case "blank":
		return c == ' ' || c == '\t'
	case "punct":
		return c > ' ' && c < 0x7f && !isAlpha(c) && !isDigit(c)
	case "xdigit":
		return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
	}
	return false
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
