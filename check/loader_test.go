package check

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// The loader verifying a fix sees the fix's files in place of the
// originals: decoded from the fix's bytes for plain files, rendered again
// from a copy when kustomize renders them; the files on disk stay as
// they are.
func TestLoaderOverlaysTheFix(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, data string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cm := func(name, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: shop}\ndata: {k: " + v + "}\n"
	}
	plain := write("plain/cm.yaml", cm("plain", "old"))
	write("kust/kustomization.yaml", "resources: [cm.yaml]\n")
	kust := write("kust/cm.yaml", cm("kust", "old"))
	src := Sources{Repository: []string{filepath.Join(dir, "plain"), filepath.Join(dir, "kust")}}
	ctx := context.Background()
	var in Input
	for _, p := range src.Repository {
		objs, err := manifest.LoadPaths(ctx, []string{p}, manifest.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		in.Repository = append(in.Repository, objs...)
	}
	values := func(in Input) []string {
		var out []string
		for _, o := range in.Repository {
			out = append(out, o.Object.GetName()+"="+o.Object.Object["data"].(map[string]any)["k"].(string))
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name    string
		src     Sources
		overlay map[string][]byte
		want    []string
		wantErr string
	}{
		{name: "no fix", src: src, want: []string{"kust=old", "plain=old"}},
		{name: "a plain file", src: src, overlay: map[string][]byte{plain: []byte(cm("plain", "new"))}, want: []string{"kust=old", "plain=new"}},
		{name: "a file kustomize renders", src: src, overlay: map[string][]byte{kust: []byte(cm("kust", "new"))}, want: []string{"kust=new", "plain=old"}},
		{name: "a file outside the paths", src: src, overlay: map[string][]byte{filepath.Join(t.TempDir(), "x.yaml"): []byte(cm("x", "new"))}, wantErr: "is outside the paths checked"},
		{name: "a Git source", src: Sources{Repository: []string{"https://example.com/org/repo.git"}}, overlay: map[string][]byte{plain: nil}, wantErr: "verified on a working tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewLoader(tt.src, in)(ctx, tt.overlay)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v := values(got); !slices.Equal(v, tt.want) {
				t.Errorf("loaded %v, want %v", v, tt.want)
			}
			for _, p := range []string{plain, kust} {
				if data, _ := os.ReadFile(p); !strings.Contains(string(data), "k: old") {
					t.Errorf("%s was written: %s", p, data)
				}
			}
		})
	}
}

// One loader verifies every candidate fix of a check, remembering the
// sections of the files it decodes: each overlay must load as decoding its
// bytes afresh would, whatever was loaded before (the objects of sections
// loaded before are shared, never changed: TestCandidatesLeaveObjects).
func TestLoaderRemembersSections(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cms.yaml")
	doc := func(i int, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c" + string(rune('a'+i)) + ", namespace: shop}\ndata:\n  k: " + v + "\n"
	}
	stream := func(vals ...string) []byte {
		var b strings.Builder
		for i, v := range vals {
			b.WriteString("---\n" + doc(i, v))
		}
		return []byte(b.String())
	}
	orig := stream("a", "b", "c", "d")
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	in := Input{Repository: objectsOf(t, file, orig)}
	load := NewLoader(Sources{Repository: []string{dir}}, in)
	for i, data := range [][]byte{
		stream("a", "b", "c", "d"),
		stream("a", "new", "c", "d"),
		stream("a", "b", "c", "new"),
		// Lines move: the sections after the edit are the same bytes on
		// other lines.
		stream("a", "b\n  k2: v", "c", "d"),
		append([]byte("# a comment\n"), stream("a", "b", "c", "d")...),
		stream("a", "b", "c", "d"),
	} {
		got, err := load(context.Background(), map[string][]byte{file: data})
		if err != nil {
			t.Fatal(err)
		}
		want := objectsOf(t, file, data)
		if len(got.Repository) != len(want) {
			t.Fatalf("overlay %d: %d objects, want %d", i, len(got.Repository), len(want))
		}
		for j := range want {
			g, w := got.Repository[j], want[j]
			if g.Source != w.Source || string(g.Raw) != string(w.Raw) || !reflect.DeepEqual(g.Object.Object, w.Object.Object) {
				t.Fatalf("overlay %d, object %d: %v %s, want %v %s", i, j, g.Source, g.Raw, w.Source, w.Raw)
			}
		}
	}
}

func objectsOf(t *testing.T, name string, data []byte) []manifest.Object {
	t.Helper()
	objs, err := manifest.Decode(name, bytes.NewReader(data), manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
