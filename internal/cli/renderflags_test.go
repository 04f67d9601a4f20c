package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check, fix, diff and lint take truce sync's Git credential flags and
// refuse them as it does.
func TestGitSecretFlags(t *testing.T) {
	root := filepath.Join("..", "..", "check", "testdata", "helm-mirror")
	apps, cluster := filepath.Join(root, "apps"), filepath.Join(root, "cluster")
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "password"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	common := []string{"--repo-root", root, "--repo-url", "https://git.example.com/platform.git", "--offline", "--cache-dir", t.TempDir()}
	commands := map[string][]string{
		"check": {"check", apps, "-c", cluster, "--no-verify"},
		"fix":   {"fix", apps, "-c", cluster, "--dry-run"},
		"diff":  {"diff", filepath.Join(root, "clusters", "dev"), "-c", cluster},
		"lint":  {"lint", apps},
	}
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"insecure http without a secret", []string{"--git-insecure-http"}, "--git-insecure-http lets the credentials of --git-secret go over plain http://: it needs --git-secret"},
		{"a missing secret directory", []string{"--git-secret", missing}, "--git-secret " + missing + ": reading the Git credentials: stat " + missing},
		{"a file", []string{"--git-secret", filepath.Join(secret, "password")}, "is not a directory"},
	}
	for name, args := range commands {
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				out, errOut, code := runTruce(t, append(append(append([]string(nil), args...), common...), tc.flags...)...)
				if code != 2 || !strings.Contains(errOut, tc.want) {
					t.Errorf("exit %d, want 2 and %q:\n%s%s", code, tc.want, out, errOut)
				}
				if strings.Contains(out+errOut, "s3cret") {
					t.Error("the output shows the secret")
				}
			})
		}
		// A secret the repository needs none of changes nothing.
		t.Run(name+"/unused secret", func(t *testing.T) {
			_, errOut, code := runTruce(t, append(append(append([]string(nil), args...), common...), "--git-secret", secret)...)
			if code == 2 {
				t.Errorf("exit 2: %s", errOut)
			}
		})
	}
}
