package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check, fix, diff and lint take truce sync's Git credential flags and
// refuse them as it does, and --bucket-secret and --registry-config likewise.
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
		{"a missing bucket secret directory", []string{"--bucket-secret", missing}, "--bucket-secret " + missing + ": reading the bucket credentials: stat " + missing},
		{"a bucket secret file", []string{"--bucket-secret", filepath.Join(secret, "password")}, "is not a directory"},
		{"a missing registry config", []string{"--registry-config", missing}, "--registry-config " + missing + ": reading the registry credentials: stat " + missing},
		{"a registry config directory", []string{"--registry-config", secret}, "is a directory"},
		{"a missing repository config", []string{"--repository-config", missing}, "--repository-config " + missing + ": reading the chart repository credentials: couldn't load repositories file (" + missing + ")"},
		{"a repository config that is not one", []string{"--repository-config", filepath.Join(secret, "password")}, "--repository-config " + filepath.Join(secret, "password") + ": reading the chart repository credentials"},
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

// Git arguments of check and diff take --git-secret's credentials (the
// Argo CD and Flux clones are tested in render/world; Git arguments are
// https:// or SSH, which loopback tests cannot serve without trusting a
// certificate).
func TestGitArgumentAuth(t *testing.T) {
	secret := t.TempDir()
	for name, content := range map[string]string{"username": "git\n", "password": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(secret, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		flags    renderFlags
		url      string
		wantAuth string
		problem  string
	}{
		{name: "no secret", url: "https://git.example.com/fleet"},
		{name: "https", flags: renderFlags{gitSecret: secret}, url: "https://git.example.com/fleet", wantAuth: "http-basic-auth - git:*******"},
		{name: "file:// takes none", flags: renderFlags{gitSecret: secret}, url: "file:///srv/fleet"},
		{name: "plain http", flags: renderFlags{gitSecret: secret}, url: "http://git.example.com/fleet", problem: "--git-secret " + secret + ": refusing to send the credentials of " + filepath.Join(secret, "username") + " and " + filepath.Join(secret, "password") + " to git.example.com over plain http://: they would cross the network in clear text; use https:// (--git-insecure-http allows it)"},
		{name: "plain http allowed", flags: renderFlags{gitSecret: secret, gitInsecureHTTP: true}, url: "http://git.example.com/fleet", wantAuth: "http-basic-auth - git:*******"},
		{name: "SSH without a key", flags: renderFlags{gitSecret: secret}, url: "git@github.com:org/fleet", problem: filepath.Join(secret, "identity") + " is missing or empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := tc.flags.gitAuth(tc.url)
			if tc.problem != "" {
				if err == nil || err.Error() != tc.problem && !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %v, want %q", err, tc.problem)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Error("the error shows the password")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if auth != nil {
				got = auth.String()
			}
			if got != tc.wantAuth {
				t.Errorf("auth %q, want %q", got, tc.wantAuth)
			}
		})
	}
}
