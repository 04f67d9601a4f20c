package version

import (
	"bytes"
	"runtime/debug"
	"testing"
)

func TestFromBuild(t *testing.T) {
	deps := []*debug.Module{
		{Path: "k8s.io/apiserver", Version: "v0.37.2"},
		{Path: "helm.sh/helm/v4", Version: "v4.3.1"},
		{Path: "github.com/fluxcd/pkg/kustomize", Version: "v1.41.0"},
		{Path: "sigs.k8s.io/kustomize/api", Version: "v0.21.2", Replace: &debug.Module{Path: "sigs.k8s.io/kustomize/api", Version: "v0.21.3"}},
	}
	tests := []struct {
		name         string
		bi           *debug.BuildInfo
		ver, rev     string
		wantVersion  string
		wantCommit   string
		wantVersions map[string]string
	}{
		{
			name: "ldflags win over build info",
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v9.9.9"}, Deps: deps,
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aaaa"}, {Key: "vcs.modified", Value: "true"}}},
			ver: "v0.2.0", rev: "bbbb",
			wantVersion: "v0.2.0", wantCommit: "bbbb",
			wantVersions: map[string]string{"Kubernetes": "v1.37.2", "Helm": "v4.3.1", "kustomize": "v0.21.3", "Argo CD": "v3.6.1"},
		},
		{
			name: "go install: module version and VCS revision",
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}, Deps: deps,
				Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "cafe"}}},
			wantVersion: "v0.3.0", wantCommit: "cafe-dirty",
		},
		{
			name:        "work tree without VCS stamping",
			bi:          &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			wantVersion: "devel",
		},
		{
			name:        "kubernetes itself is linked",
			bi:          &debug.BuildInfo{Deps: append([]*debug.Module{{Path: "k8s.io/kubernetes", Version: "v1.37.3"}}, deps...)},
			wantVersion: "devel", wantVersions: map[string]string{"Kubernetes": "v1.37.3"},
		},
		{name: "no build info", wantVersion: "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuild(tt.bi, tt.ver, tt.rev)
			if got.Version != tt.wantVersion || got.Commit != tt.wantCommit {
				t.Errorf("version, commit = %q, %q; want %q, %q", got.Version, got.Commit, tt.wantVersion, tt.wantCommit)
			}
			have := map[string]string{}
			for _, c := range got.Reproduces {
				have[c.Name] = c.Version
			}
			for name, v := range tt.wantVersions {
				if have[name] != v {
					t.Errorf("%s = %q, want %q (all: %v)", name, have[name], v, have)
				}
			}
		})
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	info := Info{Version: "v0.2.0", Commit: "abc", GoVersion: "go1.26.0", Platform: "linux/arm64",
		Reproduces: []Component{{Name: "Kubernetes", Version: "v1.37.2"}, {Name: "Argo CD", Version: "v3.6.1"}}}
	if err := WriteText(&b, info); err != nil {
		t.Fatal(err)
	}
	want := `truce   v0.2.0
commit  abc
go      go1.26.0 linux/arm64
reproduces:
  Kubernetes  v1.37.2
  Argo CD     v3.6.1
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
