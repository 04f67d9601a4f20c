package syncer

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

func TestParseSourceHTTP(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want manifest.GitSource
	}{
		{"http://git.internal/org/fleet", manifest.GitSource{URL: "http://git.internal/org/fleet"}},
		{"http://git.internal:3000/org/fleet.git//apps/shop?ref=main", manifest.GitSource{URL: "http://git.internal:3000/org/fleet.git", Path: "apps/shop", Ref: "main"}},
		{"HTTP://git.internal/org/fleet", manifest.GitSource{URL: "http://git.internal/org/fleet"}},
	} {
		got, err := parseSource(tt.arg, "", "")
		if err != nil || got != tt.want {
			t.Errorf("parseSource(%q) = %+v, %v; want %+v", tt.arg, got, err, tt.want)
		}
	}
	if _, err := parseSource("http:///org/fleet", "", ""); err == nil || !strings.Contains(err.Error(), "is not a Git URL truce can read") {
		t.Errorf("a malformed http:// URL: err = %v", err)
	}
	for _, arg := range []string{"https://bob:s3cret@git.internal/org/fleet", "http://bob:s3cret@git.internal/org/fleet//apps"} {
		if _, err := parseSource(arg, "", ""); err == nil || !strings.Contains(err.Error(), "--git-secret") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: a password in the URL: err = %v", arg, err)
		}
	}
	// A user alone (ssh://git@…, a token user name) carries no secret.
	if _, err := parseSource("ssh://git@git.internal/org/fleet", "", ""); err != nil {
		t.Errorf("ssh://git@: %v", err)
	}
}
