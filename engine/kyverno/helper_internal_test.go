package kyverno

import (
	"os"
	"path/filepath"
	"testing"
)

// The helper is found next to truce, and next to the file truce's path is
// a symlink to, as with krew's kubectl-truce on macOS.
func TestBesideExecutable(t *testing.T) {
	for _, tt := range []struct {
		name string
		// files are created empty; links are symlinks, name → target,
		// relative to the test's directory.
		files []string
		links map[string]string
		exe   string
		want  string // "" when nothing is found
	}{
		{name: "next to truce", files: []string{"bin/truce", "bin/truce-kyverno"}, exe: "bin/truce", want: "bin/truce-kyverno"},
		{name: "missing", files: []string{"bin/truce"}, exe: "bin/truce"},
		{
			name:  "krew symlink",
			files: []string{"store/truce/v1/truce", "store/truce/v1/truce-kyverno"},
			links: map[string]string{"bin/kubectl-truce": "../store/truce/v1/truce"},
			exe:   "bin/kubectl-truce", want: "store/truce/v1/truce-kyverno",
		},
		{
			name:  "next to the symlink first",
			files: []string{"store/truce", "store/truce-kyverno", "bin/truce-kyverno"},
			links: map[string]string{"bin/truce": "../store/truce"},
			exe:   "bin/truce", want: "bin/truce-kyverno",
		},
		{
			name:  "a directory is not the helper",
			files: []string{"bin/truce", "bin/truce-kyverno/x"},
			exe:   "bin/truce",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, target := range tt.links {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := besideExecutable(filepath.Join(dir, tt.exe))
			want := ""
			if tt.want != "" {
				want = filepath.Join(dir, tt.want)
			}
			// EvalSymlinks may resolve the temporary directory itself
			// (/tmp → /private/tmp on macOS): compare the files.
			if ok != (want != "") || (ok && !sameFile(t, got, want)) {
				t.Errorf("besideExecutable = %q, %v; want %q", got, ok, want)
			}
		})
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}
