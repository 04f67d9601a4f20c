package argocd

import "github.com/gobwas/glob"

// pattern is an include or exclude pattern of a directory source, matched
// against a file's path relative to the source's directory with Argo CD's
// glob semantics (util/glob over gobwas/glob, no separators): * and **
// match any run of characters including "/", ? one character, [a-z] and
// [!a-z] classes, {a,b} alternatives.
//
// Argo CD 3.6 uses gobwas/glob v1.0.0; this module has v0.2.3, which Helm
// also uses for .Files.Glob (so it cannot be upgraded without changing Helm
// rendering). The two agree on ordinary patterns; v0.2.3 wrongly matches
// when a literal prefix and suffix around * overlap ("a*ant" matches
// "ant"), and ? does not match a multi-byte character in some positions.
type pattern struct {
	g glob.Glob
	// bad records a pattern that does not compile: Argo CD's Match then
	// logs a warning and reports no match.
	bad bool
}

func compilePattern(p string) (c pattern) {
	defer func() {
		// v0.2.3 panics on some malformed patterns that v1 rejects.
		if recover() != nil {
			c = pattern{bad: true}
		}
	}()
	g, err := glob.Compile(p)
	if err != nil {
		return pattern{bad: true}
	}
	return pattern{g: g}
}

func (p pattern) match(text string) (ok bool) {
	if p.bad {
		return false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return p.g.Match(text)
}
