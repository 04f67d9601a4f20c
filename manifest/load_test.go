package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func obj(kind, name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: %s\nmetadata:\n  name: %s\n", kind, name)
}

// writeTree creates files (relative path -> content) under a new temporary
// directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// relSources describes objects with file names relative to root.
func relSources(t *testing.T, root string, objs []Object) []string {
	t.Helper()
	out := describe(objs)
	for i := range out {
		out[i] = strings.TrimPrefix(filepath.ToSlash(out[i]), filepath.ToSlash(root)+"/")
	}
	return out
}

func TestLoadPathsDirectory(t *testing.T) {
	root := writeTree(t, map[string]string{
		"b.yaml":                     obj("B", "b"),
		"a.yaml":                     "# first\n" + obj("A", "a1") + "---\n" + obj("A", "a2"),
		"sub/c.yml":                  obj("C", "c"),
		"sub/d.json":                 `{"apiVersion":"v1","kind":"D","metadata":{"name":"d"}}`,
		"a/z.yaml":                   obj("Z", "z"),
		"notes.txt":                  "not a manifest",
		"README.md":                  "# docs",
		"UPPER.YAML":                 obj("Upper", "skipped-like-kubectl"),
		".hidden.yaml":               obj("Hidden", "h"),
		".github/workflows/ci.yml":   "on: push\njobs: {}\n",
		"sub/.git/config.yaml":       "not: a manifest\n",
		"kustomization.yaml.orig":    "ignored",
		"empty/nothing-here.txt":     "",
		"sub/deeper/more/e.yaml":     obj("E", "e"),
		"sub/deeper/more/empty.yaml": "# nothing\n",
	})
	objs, err := LoadPaths(context.Background(), []string{root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a/z.yaml:1 v1/Z z", // entry by entry: directory "a" sorts before "a.yaml"
		"a.yaml:2 v1/A a1",
		"a.yaml:7 v1/A a2",
		"b.yaml:1 v1/B b",
		"sub/c.yml:1 v1/C c",
		"sub/d.json:1 v1/D d",
		"sub/deeper/more/e.yaml:1 v1/E e",
	}
	if got := relSources(t, root, objs); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestLoadPathsExplicitFiles(t *testing.T) {
	root := writeTree(t, map[string]string{
		"x.txt":          obj("X", "x"),
		".hidden.yaml":   obj("H", "h"),
		"dir/a.yaml":     obj("A", "a"),
		"dir/b.yaml":     obj("B", "b"),
		"noext":          `{"apiVersion":"v1","kind":"N","metadata":{"name":"n"}}`,
		"dir/.skip.yaml": obj("S", "s"),
	})
	paths := []string{
		filepath.Join(root, "x.txt"), // any extension when named explicitly
		filepath.Join(root, ".hidden.yaml"),
		filepath.Join(root, "dir", "b.yaml"),
		filepath.Join(root, "dir"), // b.yaml is not loaded twice
		filepath.Join(root, "noext"),
		filepath.Join(root, "dir", "..", "dir", "a.yaml"), // nor is a.yaml
	}
	objs, err := LoadPaths(context.Background(), paths, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"x.txt:1 v1/X x", ".hidden.yaml:1 v1/H h", "dir/b.yaml:1 v1/B b", "dir/a.yaml:1 v1/A a", "noext:1 v1/N n"}
	if got := relSources(t, root, objs); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestLoadPathsSymlinkedDirectory(t *testing.T) {
	root := writeTree(t, map[string]string{"real/a.yaml": obj("A", "a")})
	link := filepath.Join(root, "link")
	if err := os.Symlink(filepath.Join(root, "real"), link); err != nil {
		t.Skipf("symlinks not supported: %v", err)
	}
	objs, err := LoadPaths(context.Background(), []string{link}, Options{})
	if err != nil || len(objs) != 1 {
		t.Fatalf("got %d objects, %v", len(objs), err)
	}
	if got, want := objs[0].Source.File, filepath.Join(link, "a.yaml"); got != want {
		t.Errorf("File = %q, want %q", got, want)
	}
}

func TestLoadPathsStdin(t *testing.T) {
	root := writeTree(t, map[string]string{"a.yaml": obj("A", "a")})
	opts := Options{Stdin: strings.NewReader("\n" + obj("S", "s"))}
	objs, err := LoadPaths(context.Background(), []string{"-", filepath.Join(root, "a.yaml"), "-"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"<stdin>:2 v1/S s", "a.yaml:1 v1/A a"}
	if got := relSources(t, root, objs); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	_, err = LoadPaths(context.Background(), []string{"-"}, Options{})
	checkErrors(t, err, os.ErrInvalid, `<stdin>: "-" given but Options.Stdin is nil`)
}

func TestLoadPathsStdinTooLarge(t *testing.T) {
	opts := Options{MaxFileBytes: 64, Stdin: strings.NewReader(obj("S", strings.Repeat("s", 100)))}
	objs, err := LoadPaths(context.Background(), []string{"-"}, opts)
	checkErrors(t, err, ErrTooLarge, "<stdin>: input is larger than the 64 bytes limit (MaxFileBytes)")
	if len(objs) != 0 {
		t.Errorf("got %d objects", len(objs))
	}
}

func TestLoadPathsFileTooLarge(t *testing.T) {
	root := writeTree(t, map[string]string{"ok.yaml": obj("A", "a")})
	big := filepath.Join(root, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: the size check must happen before reading, so this
	// costs neither disk nor memory.
	if err := f.Truncate(DefaultMaxFileBytes + 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	objs, err := LoadPaths(context.Background(), []string{big, filepath.Join(root, "ok.yaml")}, DefaultOptions())
	checkErrors(t, err, ErrTooLarge, big+": file is 17 MiB, larger than the 16 MiB limit (MaxFileBytes)")
	if len(objs) != 1 {
		t.Errorf("got %d objects, want the other file's", len(objs))
	}
}

func TestLoadPathsMaxTotalBytes(t *testing.T) {
	files := map[string]string{}
	for i := range 5 {
		files[fmt.Sprintf("f%d.yaml", i)] = obj("A", fmt.Sprintf("a%d", i)) // 45 bytes each
	}
	root := writeTree(t, files)
	objs, err := LoadPaths(context.Background(), []string{root}, Options{MaxTotalBytes: 100})
	checkErrors(t, err, ErrTooLarge, "f2.yaml: total input exceeds the 100 bytes limit (MaxTotalBytes)")
	if len(objs) != 2 {
		t.Errorf("got %d objects, want 2", len(objs))
	}
}

func TestLoadPathsErrorsAreCollected(t *testing.T) {
	root := writeTree(t, map[string]string{
		"bad1.yaml":  obj("A", "a") + "---\nkind: B\n",
		"good.yaml":  obj("G", "g"),
		"bad2.json":  `{"apiVersion":"v1"}`,
		"empty/x.md": "",
	})
	objs, err := LoadPaths(context.Background(), []string{
		root,
		filepath.Join(root, "missing.yaml"),
		filepath.Join(root, "empty"),
	}, Options{})
	checkErrors(t, err, nil,
		"bad1.yaml:6: missing apiVersion",
		"bad2.json:1: missing kind",
		"missing.yaml: cannot read: stat: no such file or directory",
		"empty: directory contains no manifest files",
	)
	errs := flatten(err)
	if !errors.Is(errs[0], ErrInvalidObject) || !errors.Is(errs[2], fs.ErrNotExist) {
		t.Errorf("errors not classified: %v", err)
	}
	if got := len(objs); got != 2 {
		t.Errorf("got %d objects, want 2 (%q)", got, describe(objs))
	}
}

// cancelOnRead cancels a context when it is first read.
type cancelOnRead struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c cancelOnRead) Read(p []byte) (int, error) {
	c.cancel()
	return c.r.Read(p)
}

func TestLoadPathsCancellation(t *testing.T) {
	root := writeTree(t, map[string]string{"a.yaml": obj("A", "a"), "b.yaml": obj("B", "b")})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	objs, err := LoadPaths(ctx, []string{root}, Options{})
	if !errors.Is(err, context.Canceled) || len(objs) != 0 {
		t.Errorf("cancelled before start: got %d objects, %v", len(objs), err)
	}

	// Cancelled while reading the first input: that input completes, the
	// next file is not read.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	opts := Options{Stdin: cancelOnRead{strings.NewReader(obj("S", "s")), cancel}}
	objs, err = LoadPaths(ctx, []string{"-", filepath.Join(root, "a.yaml")}, opts)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got := describe(objs); !slices.Equal(got, []string{"<stdin>:1 v1/S s"}) {
		t.Errorf("got %q", got)
	}

	// Cancelled in the middle of a directory walk.
	ctx = &countdownCtx{Context: context.Background(), left: 2}
	objs, err = LoadPaths(ctx, []string{root}, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got := relSources(t, root, objs); !slices.Equal(got, []string{"a.yaml:1 v1/A a"}) {
		t.Errorf("got %q, want only the first file", got)
	}
}

// countdownCtx reports cancellation once Err has been called left times.
type countdownCtx struct {
	context.Context
	left int
}

func (c *countdownCtx) Err() error {
	if c.left <= 0 {
		return context.Canceled
	}
	c.left--
	return nil
}

func TestLoadPathsPreservesErrorsBeforeCancellation(t *testing.T) {
	root := writeTree(t, map[string]string{"bad.yaml": "kind: A\n"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := Options{Stdin: cancelOnRead{strings.NewReader(""), cancel}}
	_, err := LoadPaths(ctx, []string{filepath.Join(root, "bad.yaml"), "-", root}, opts)
	if !errors.Is(err, ErrInvalidObject) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want both the document error and context.Canceled", err)
	}
}
