package argocd

import (
	"io/fs"
	"path/filepath"
	"testing"
	"testing/fstest"
)

func TestSourceType(t *testing.T) {
	tests := []struct {
		name  string
		dir   string            // an example app, or
		files map[string]string // a fixture
		want  Type
	}{
		{name: "plain manifests", dir: "guestbook", want: TypeDirectory},
		{name: "jsonnet", dir: "jsonnet-guestbook", want: TypeDirectory},
		{name: "kustomization", dir: "kustomize-guestbook", want: TypeKustomize},
		{name: "kustomization and Chart.yaml: kustomization sorts last", dir: "plugins/kustomized-helm", want: TypeKustomize},
		{name: "plugin source without plugin fields", dir: "plugins/kasane", want: TypeDirectory},
		{name: "Chart.yaml", files: map[string]string{"Chart.yaml": "name: x", "values.yaml": ""}, want: TypeHelm},
		{name: "name ending in Chart.yaml", files: map[string]string{"myChart.yaml": ""}, want: TypeHelm},
		{name: "Chart.yaml after kustomization in order", files: map[string]string{"kustomization.yaml": "", "zChart.yaml": ""}, want: TypeHelm},
		{name: "Kustomization", files: map[string]string{"Kustomization": ""}, want: TypeKustomize},
		{name: "kustomization.yml", files: map[string]string{"kustomization.yml": ""}, want: TypeKustomize},
		{name: "only subdirectories count as themselves", files: map[string]string{"sub/Chart.yaml": "", "sub/kustomization.yaml": ""}, want: TypeDirectory},
		{name: "chart.yaml lower case", files: map[string]string{"chart.yaml": ""}, want: TypeDirectory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(examples, tt.dir)
			if tt.files != nil {
				dir = writeFiles(t, tt.files)
			}
			got, err := SourceType(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("SourceType = %s, want %s", got, tt.want)
			}
			if tt.files != nil {
				// The same entries read from another file system (truce
				// sync reads a Git tree).
				fsys := fstest.MapFS{}
				for name, content := range tt.files {
					fsys[name] = &fstest.MapFile{Data: []byte(content)}
				}
				entries, err := fs.ReadDir(fsys, ".")
				if err != nil {
					t.Fatal(err)
				}
				if got := TypeOf(entries); got != tt.want {
					t.Errorf("TypeOf = %s, want %s", got, tt.want)
				}
			}
		})
	}
	if _, err := SourceType(filepath.Join(examples, "does-not-exist")); err == nil {
		t.Error("no error for a missing directory")
	}
}

func TestExplicitType(t *testing.T) {
	tests := []struct {
		set     []Type
		want    Type
		wantErr string
	}{
		{set: nil, want: ""},
		{set: []Type{TypePlugin}, want: TypePlugin},
		{set: []Type{TypeKustomize, TypeHelm}, wantErr: "multiple application sources defined: Kustomize,Helm"},
	}
	for _, tt := range tests {
		got, err := ExplicitType(tt.set...)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("ExplicitType(%v) = %q, %v; want %q, %q", tt.set, got, err, tt.want, tt.wantErr)
		}
	}
}
