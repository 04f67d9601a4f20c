package argocd

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gobwas/glob"
)

// TestPattern pins the include/exclude semantics Argo CD documents and
// users rely on.
func TestPattern(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"{a.yaml,b.yaml}", "a.yaml", true},
		{"{a.yaml,b.yaml}", "b.yaml", true},
		{"{a.yaml,b.yaml}", "c.yaml", false},
		{"{a.yaml,b.yaml}", "sub/a.yaml", false},
		{"*.yaml", "sub/deep/a.yaml", true}, // no separator: * crosses "/"
		{"*.yaml", "a.yml", false},
		{"config/*", "config/a/b.yaml", true},
		{"**/*.yaml", "a.yaml", false}, // the "/" is literal
		{"*/*.yaml", "a/b.yaml", true},
		{"*.{yml,yaml}", "x/y.yml", true},
		{"[a-c].yaml", "b.yaml", true},
		{"[!a-c].yaml", "b.yaml", false},
		{"?.yaml", "ab.yaml", false},
		{`\*.yaml`, "*.yaml", true},
		{`\*.yaml`, "a.yaml", false},
		{"*prod*", "overlays/prod/x.yaml", true},
		{"[a", "[a", false}, // does not compile: matches nothing
		{"", "", true},
	}
	for _, tt := range tests {
		if got := compilePattern(tt.pattern).match(tt.path); got != tt.want {
			t.Errorf("match(%q, %q) = %t, want %t", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// FuzzPattern checks that no pattern or path panics or hangs, and that the
// properties Argo CD's users depend on hold for any path: a quoted path
// matches itself, "*" matches everything, and a brace list matches each
// of its (quoted) alternatives.
func FuzzPattern(f *testing.F) {
	for _, s := range []string{"a.yaml", "{a,b}", "*.y?ml", "[!a-z]", "0{", "/{a{*.json{", `\`, "a*ant", "sub/**/x"} {
		f.Add(s, "sub/a.yaml")
	}
	f.Fuzz(func(t *testing.T, pat, path string) {
		if len(pat) > 256 || len(path) > 256 {
			return
		}
		compilePattern(pat).match(path) // must not panic
		// File names are UTF-8 here and never hold NUL (which gobwas
		// v0.2.3 fails to match literally).
		if !utf8.ValidString(path) || strings.ContainsRune(path, 0) {
			return
		}
		if !compilePattern(glob.QuoteMeta(path)).match(path) {
			t.Errorf("quoted %q does not match itself", path)
		}
		if !compilePattern("*").match(path) {
			t.Errorf("* does not match %q", path)
		}
		if path != "" && !strings.ContainsAny(path, ",{}") {
			brace := "{" + glob.QuoteMeta(path) + ",other}"
			if !compilePattern(brace).match(path) {
				t.Errorf("%q does not match %q", brace, path)
			}
		}
	})
}
