package helm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/loader"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// fixture is the absolute, symlink-free path of a test chart.
func fixture(t testing.TB, name string) string {
	t.Helper()
	p, err := realPath(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// helmTemplate runs helm template in process, as the helm binary would.
func helmTemplate(t testing.TB, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd, err := helmcmd.NewRootCmd(&out, args, func(bool) {})
	if err != nil {
		t.Fatal(err)
	}
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err = cmd.Execute()
	return out.String(), err
}

// mustLoad loads a chart directory without network access.
func mustLoad(t testing.TB, dir string) *Chart {
	t.Helper()
	ch, err := Load(context.Background(), dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func mustRender(t testing.TB, ch *Chart, rel Release, vals map[string]any, opts render.Options) *Rendered {
	t.Helper()
	out, err := Render(context.Background(), ch, rel, vals, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// names lists objects as kind/name.
func names(objs []manifest.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Object.GetKind()+"/"+o.Object.GetName())
	}
	return out
}

// find returns the object of that kind and name.
func find(t testing.TB, objs []manifest.Object, kind, name string) manifest.Object {
	t.Helper()
	for _, o := range objs {
		if o.Object.GetKind() == kind && o.Object.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s in %v", kind, name, names(objs))
	return manifest.Object{}
}

// writeFiles writes files (path -> content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// copyDir copies a fixture into a temporary directory.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// LoadArchiveOrDir loads a chart with Helm's loader, for building archives.
func LoadArchiveOrDir(path string) (*chart.Chart, error) {
	c, err := loader.Load(path)
	if err != nil {
		return nil, err
	}
	return c.(*chart.Chart), nil
}

func removeAll(p string) error { return os.RemoveAll(p) }

// copyChartArchive packages ch into dir as Helm does.
func copyChartArchive(ch *chart.Chart, dir string) error {
	_, err := chartutil.Save(ch, dir)
	return err
}

// unstructuredInt reads an integer field.
func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	return unstructured.NestedInt64(obj, fields...)
}
