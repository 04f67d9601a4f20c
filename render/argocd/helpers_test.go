package argocd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// examples is the copy of argoproj/argocd-example-apps, a repository root
// of its own.
const examples = "testdata/argocd-example-apps"

func exampleOpts() render.Options {
	return render.Options{Manifest: manifest.Options{RepositoryRoot: examples}}
}

// writeFiles creates files (path -> content) under a new directory, which
// it returns; a content starting with "->" makes a symlink to the rest.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// describe summarises objects as "source kind/name", sources relative to
// root.
func describe(root string, objs []manifest.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		src := o.Source
		src.File = rel(root, src.File)
		src.RenderRoot = rel(root, src.RenderRoot)
		src.Kustomization = rel(root, src.Kustomization)
		out[i] = fmt.Sprintf("%s %s/%s", src, o.Object.GetKind(), o.Object.GetName())
	}
	return out
}

func rel(root, p string) string {
	if p == "" {
		return ""
	}
	return filepath.ToSlash(strings.TrimPrefix(strings.TrimPrefix(p, root), string(filepath.Separator)))
}

func cm(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
}
