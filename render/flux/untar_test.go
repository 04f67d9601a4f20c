package flux

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name, link string
	typ        byte
	body       string
}

func tarGz(t testing.TB, entries ...entry) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestExtractTarGz(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    map[string]string
		problem string
	}{
		{name: "files and directories", data: tarGz(t, entry{name: "d/", typ: tar.TypeDir}, entry{name: "d/a.yaml", typ: tar.TypeReg, body: "a"}, entry{name: "/b.yaml", typ: tar.TypeReg, body: "b"}),
			want: map[string]string{"d/a.yaml": "a", "b.yaml": "b"}},
		{name: "links and paths leaving are left out", data: tarGz(t, entry{name: "../up.yaml", typ: tar.TypeReg, body: "x"}, entry{name: "l", link: "/etc/passwd", typ: tar.TypeSymlink},
			entry{name: "h", link: "../up.yaml", typ: tar.TypeLink}, entry{name: "ok.yaml", typ: tar.TypeReg, body: "ok"}),
			want: map[string]string{"ok.yaml": "ok"}},
		{name: "a file too large", data: tarGz(t, entry{name: "big", typ: tar.TypeReg, body: strings.Repeat("x", 200)}), problem: "big is 200 bytes, more than the limit of 100"},
		{name: "too much in all", data: tarGz(t, entry{name: "a", typ: tar.TypeReg, body: strings.Repeat("x", 90)}, entry{name: "b", typ: tar.TypeReg, body: strings.Repeat("x", 90)}), problem: "more than the limit of 150 bytes"},
		{name: "not gzip", data: []byte("plain text"), problem: "requires gzip-compressed body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "layer.tgz")
			if err := os.WriteFile(src, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(base, "out")
			err := ExtractTarGz(src, dst, 100, 150)
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %v, want one with %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && p != src {
					rel, _ := filepath.Rel(dst, p)
					data, _ := os.ReadFile(p)
					got[filepath.ToSlash(rel)] = string(data)
				}
				return nil
			})
			if len(got) != len(tc.want) {
				t.Errorf("files %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// Whatever the tarball, nothing is written outside the directory and
// nothing panics.
func FuzzExtractTarGz(f *testing.F) {
	f.Add(tarGz(f, entry{name: "a/b.yaml", typ: tar.TypeReg, body: "x"}))
	f.Add(tarGz(f, entry{name: "../../x", typ: tar.TypeReg, body: "x"}, entry{name: "s", link: "..", typ: tar.TypeSymlink}))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		src := filepath.Join(base, "layer.tgz")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = ExtractTarGz(src, filepath.Join(base, "out"), 1<<16, 1<<18)
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.Name() != "layer.tgz" && e.Name() != "out" {
				t.Fatalf("wrote %s outside the directory", e.Name())
			}
		}
	})
}
