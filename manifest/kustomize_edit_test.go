package manifest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBuildKustomization(t *testing.T) {
	replace := func(old, new string) KustomizationEdit {
		return func(data []byte) ([]byte, error) {
			if !bytes.Contains(data, []byte(old)) {
				return nil, errors.New("unexpected kustomization: " + string(data))
			}
			return bytes.ReplaceAll(data, []byte(old), []byte(new)), nil
		}
	}
	tests := []struct {
		name    string
		dir     string
		edit    KustomizationEdit
		want    []string
		wantErr error
		errText string
	}{
		{name: "no edit", dir: "overlays/prod", want: []string{
			"base/app.yaml:9 (kustomization overlays/prod/kustomization.yaml) Service prod-web",
			"base/app.yaml:1 (kustomization overlays/prod/kustomization.yaml) Deployment prod-web",
		}},
		{name: "edit applies and objects keep their lines", dir: "overlays/prod", edit: replace("namePrefix: prod-", "namePrefix: edited-"), want: []string{
			"base/app.yaml:9 (kustomization overlays/prod/kustomization.yaml) Service edited-web",
			"base/app.yaml:1 (kustomization overlays/prod/kustomization.yaml) Deployment edited-web",
		}},
		{name: "edit failure names the kustomization", dir: "overlays/prod",
			edit:    func([]byte) ([]byte, error) { return nil, errors.New("label app already in kustomization file") },
			wantErr: ErrKustomize, errText: "overlays/prod/kustomization.yaml: label app already in kustomization file"},
		{name: "remote reference added by the edit is refused", dir: "overlays/prod",
			edit:    replace("- ../../base", "- ../../base\n- https://example.com/x.yaml"),
			wantErr: ErrRemoteReference, errText: "overlays/prod/kustomization.yaml: resources entry"},
		{name: "edit escaping the repository is refused", dir: "overlays/prod",
			edit: replace("- ../../base", "- ../../../outside"), wantErr: ErrOutsideRoot},
		{name: "no kustomization", dir: "base/..", wantErr: os.ErrNotExist, errText: "holds no kustomization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newKustomizeFixture(t, map[string]string{"base/kustomization.yaml": "resources: [app.yaml]\n"})
			before, _ := os.ReadFile(filepath.Join(root, "overlays/prod/kustomization.yaml"))
			objs, err := BuildKustomization(context.Background(), filepath.Join(root, tt.dir), tt.edit, Options{})
			if tt.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.errText != "" && !strings.Contains(filepath.ToSlash(err.Error()), tt.errText) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.errText)
			}
			if got := describeKustomized(t, root, objs); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			after, _ := os.ReadFile(filepath.Join(root, "overlays/prod/kustomization.yaml"))
			if !bytes.Equal(before, after) {
				t.Error("the kustomization file on disk was changed")
			}
		})
	}
}
