package check

import (
	"os"
	"path/filepath"
	"testing"
)

// A workspace copies a repository once, writes each fix's files over the
// copy and puts it back afterwards: new files and the directories made for
// them go, changed files get their content back, the repository itself is
// never written.
func TestWorkspaceReusesOneCopy(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"apps/a.yaml": "a: 1\n", "apps/b.yaml": "b: 1\n"})
	ws := NewWorkspace()
	defer ws.Close()
	var dirs []string
	read := func(dir, rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return "(absent)"
		}
		return string(b)
	}
	fixes := []map[string][]byte{
		{filepath.Join(root, "apps", "a.yaml"): []byte("a: 2\n"), filepath.Join(root, "new", "deep", "c.yaml"): []byte("c: 1\n")},
		{filepath.Join(root, "apps", "b.yaml"): []byte("b: 2\n")},
	}
	want := []map[string]string{
		{"apps/a.yaml": "a: 2\n", "apps/b.yaml": "b: 1\n", "new/deep/c.yaml": "c: 1\n"},
		{"apps/a.yaml": "a: 1\n", "apps/b.yaml": "b: 2\n", "new/deep/c.yaml": "(absent)"},
	}
	for i, files := range fixes {
		err := ws.with(root, files, func(dir string, _ func(string) (string, error)) error {
			dirs = append(dirs, dir)
			for rel, content := range want[i] {
				if got := read(dir, filepath.FromSlash(rel)); got != content {
					t.Errorf("fix %d: %s holds %q, want %q", i, rel, got, content)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if dirs[0] != dirs[1] {
		t.Errorf("copied twice: %s and %s", dirs[0], dirs[1])
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "new")); !os.IsNotExist(err) {
		t.Errorf("the directory made for a fix's new file is still in the copy: %v", err)
	}
	if got := read(root, filepath.Join("apps", "a.yaml")); got != "a: 1\n" {
		t.Errorf("the repository was written: %q", got)
	}
	if err := ws.with(root, map[string][]byte{filepath.Join(root, "..", "outside.yaml"): []byte("x")}, func(string, func(string) (string, error)) error { return nil }); err == nil {
		t.Error("a file outside the repository was accepted")
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
		t.Errorf("Close left the copy: %v", err)
	}
}
