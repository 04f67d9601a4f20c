package flux

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/render"
)

// tree lists the files under dir with their contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestArtifactCopyExample(t *testing.T) {
	arts := artifacts(t)
	var got []string
	for f := range tree(t, arts["apps"]) {
		got = append(got, f)
	}
	sort.Strings(got)
	want := []string{"base/podinfo/kustomization.yaml", "base/podinfo/namespace.yaml", "base/podinfo/release.yaml",
		"base/podinfo/repository.yaml", "staging/kustomization.yaml", "staging/podinfo-values.yaml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("apps artifact (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(arts["infrastructure"], "controllers", "kustomization.yaml")); err != nil {
		t.Errorf("infrastructure artifact: %v", err)
	}
}

func TestArtifactCopy(t *testing.T) {
	src := map[string]string{
		"app/deploy.yaml":        "kind: Deployment\n",
		"app/README.md":          "docs",
		"app/sub/svc.yaml":       "kind: Service\n",
		"app/sub/notes.md":       "notes",
		"app/tests/t.yaml":       "kind: Test\n",
		"values/a.yaml":          "replicas: 1\nimage: {repo: nginx, tag: \"1\"}\nlist: [a]\n",
		"values/b.yaml":          "image: {tag: \"2\"}\nlist: [b]\n---\nextra: true\n",
		"values/dir/values.yaml": "x: 1\n",
	}
	other := map[string]string{"values.yaml": "replicas: 3\n"}
	tests := []struct {
		name    string
		rules   []CopyRule
		want    map[string]string
		wantErr string
		wantIs  error
	}{
		{name: "dir/** copies the contents", rules: []CopyRule{{From: "@src/app/**", To: "@artifact/"}},
			want: map[string]string{"deploy.yaml": "kind: Deployment\n", "README.md": "docs", "sub/svc.yaml": "kind: Service\n",
				"sub/notes.md": "notes", "tests/t.yaml": "kind: Test\n"}},
		{name: "a directory is copied as itself", rules: []CopyRule{{From: "@src/app/sub", To: "@artifact/x"}},
			want: map[string]string{"x/sub/svc.yaml": "kind: Service\n", "x/sub/notes.md": "notes"}},
		{name: "a file to a name", rules: []CopyRule{{From: "@src/app/deploy.yaml", To: "@artifact/d.yaml"}},
			want: map[string]string{"d.yaml": "kind: Deployment\n"}},
		{name: "a file into a directory", rules: []CopyRule{{From: "@src/app/deploy.yaml", To: "@artifact/out/"}},
			want: map[string]string{"out/deploy.yaml": "kind: Deployment\n"}},
		{name: "glob keeps the matched path, ** is one level", rules: []CopyRule{{From: "@src/app/**/*.yaml", To: "@artifact/m/"}},
			want: map[string]string{"m/app/sub/svc.yaml": "kind: Service\n", "m/app/tests/t.yaml": "kind: Test\n"}},
		{name: "excludes by name, by relative path and by **", rules: []CopyRule{{From: "@src/app/**", To: "@artifact/",
			Exclude: []string{"*.md", "tests/**"}}},
			want: map[string]string{"deploy.yaml": "kind: Deployment\n", "sub/svc.yaml": "kind: Service\n"}},
		{name: "later rules overwrite", rules: []CopyRule{
			{From: "@src/values/a.yaml", To: "@artifact/values.yaml"},
			{From: "@other/values.yaml", To: "@artifact/values.yaml"}},
			want: map[string]string{"values.yaml": "replicas: 3\n"}},
		{name: "Merge deep-merges YAML, lists replaced", rules: []CopyRule{
			{From: "@src/values/a.yaml", To: "@artifact/values.yaml"},
			{From: "@src/values/b.yaml", To: "@artifact/values.yaml", Strategy: StrategyMerge}},
			want: map[string]string{"values.yaml": "extra: true\nimage:\n  repo: nginx\n  tag: \"2\"\nlist:\n- b\nreplicas: 1\n"}},
		{name: "Merge into nothing copies", rules: []CopyRule{{From: "@src/values/b.yaml", To: "@artifact/v.yaml", Strategy: StrategyMerge}},
			want: map[string]string{"v.yaml": "image: {tag: \"2\"}\nlist: [b]\n---\nextra: true\n"}},
		{name: "optional missing source", rules: []CopyRule{{From: "@src/nope/**", To: "@artifact/", Optional: true}},
			want: map[string]string{}},
		{name: "missing glob", rules: []CopyRule{{From: "@src/nope/*", To: "@artifact/"}}, wantErr: "no files match"},
		{name: "missing file", rules: []CopyRule{{From: "@src/nope.yaml", To: "@artifact/"}}, wantErr: "does not exist"},
		{name: "all excluded", rules: []CopyRule{{From: "@src/app/*.md", To: "@artifact/", Exclude: []string{"*.md"}}},
			wantErr: "were excluded"},
		{name: "unknown alias", rules: []CopyRule{{From: "@nope/x", To: "@artifact/"}}, wantErr: "alias 'nope' not found"},
		{name: "bad source", rules: []CopyRule{{From: "src/x", To: "@artifact/"}}, wantErr: "@alias/pattern"},
		{name: "bad destination", rules: []CopyRule{{From: "@src/app", To: "/tmp"}}, wantErr: "@artifact/"},
		{name: "destination escaping", rules: []CopyRule{{From: "@src/app", To: "@artifact/../x"}}, wantErr: "within the artifact"},
		{name: "source escaping", rules: []CopyRule{{From: "@src/../x", To: "@artifact/"}}, wantErr: "escapes"},
		{name: "bad exclude", rules: []CopyRule{{From: "@src/app", To: "@artifact/", Exclude: []string{"[z-a"}}}, wantErr: "exclude"},
		{name: "Extract is unpredictable", rules: []CopyRule{{From: "@src/*.tgz", To: "@artifact/", Strategy: StrategyExtract}},
			wantIs: &render.Unpredictable{}},
		{name: "unknown strategy", rules: []CopyRule{{From: "@src/app", To: "@artifact/", Strategy: "Append"}}, wantErr: "unknown strategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			roots := map[string]string{"src": writeFiles(t, src), "other": writeFiles(t, other)}
			dst := filepath.Join(t.TempDir(), "artifact")
			err := ArtifactCopy(roots, tt.rules, dst)
			if tt.wantErr != "" || tt.wantIs != nil {
				if err == nil {
					t.Fatal("want an error")
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				if _, ok := render.AsUnpredictable(err); tt.wantIs != nil && !ok {
					t.Errorf("err = %v, want Unpredictable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tree(t, dst)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestArtifactCopySymlinkOutside(t *testing.T) {
	outside := writeFiles(t, map[string]string{"secret.yaml": "kind: Secret\n"})
	src := writeFiles(t, map[string]string{"app/a.yaml": "a: 1\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(src, "app", "leak.yaml")); err != nil {
		t.Fatal(err)
	}
	err := ArtifactCopy(map[string]string{"src": src}, []CopyRule{{From: "@src/app/**", To: "@artifact/"}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "leak.yaml") || !strings.Contains(err.Error(), "escapes") {
		t.Fatalf("err = %v, want the escaping symlink refused", err)
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*.md", "a.md", true},
		{"*.md", "dir/a.md", false},
		{"**/*.md", "a.md", true},
		{"**/*.md", "x/y/a.md", true},
		{"tests/**", "tests/a/b.yaml", true},
		{"tests/**", "other/a", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"**/**/**/**/z", strings.Repeat("a/", 40) + "y", false},
		{"[", "[", false},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}
