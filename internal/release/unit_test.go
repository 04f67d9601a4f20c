package release

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Target
		wantErr bool
	}{
		{in: "linux/arm64", want: Target{"linux", "arm64"}},
		{in: "linux", wantErr: true},
		{in: "linux/arm/v7", wantErr: true},
		{in: "/amd64", wantErr: true},
	} {
		got, err := ParseTarget(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseTarget(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// The image has no libc and runs one architecture per manifest: a binary
// for another platform, or one that is not a Go binary, is refused. The
// test binary itself is a Go binary for the host, built with cgo on or off.
func TestImageRefusesWrongBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notGo := filepath.Join(t.TempDir(), "truce")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := Target{OS: "linux", Arch: "arm64"}
	if runtime.GOARCH == "arm64" {
		other.Arch = "amd64"
	}
	for _, tt := range []struct {
		name    string
		bins    map[Target]string
		wantErr string
	}{
		{"none", nil, "no binaries"},
		{"darwin", map[Target]string{{"darwin", "arm64"}: self}, "not a linux binary"},
		{"other arch", map[Target]string{other: self}, "is built for"},
		{"not Go", map[Target]string{{"linux", runtime.GOARCH}: notGo}, "build information"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Image(ImageOptions{Binaries: tt.bins, WorkDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// A dependency is recorded at the version it was built from: a module
// replaced by another at the replacement's, one of truce's own nested
// modules (replaced by its directory) at the release's version, never as
// a directory without a version.
func TestDepVersion(t *testing.T) {
	for _, tt := range []struct {
		name              string
		dep               debug.Module
		wantPath, wantVer string
	}{
		{name: "plain", dep: debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}, wantPath: "k8s.io/api", wantVer: "v0.37.2"},
		{
			name:     "replaced by a version",
			dep:      debug.Module{Path: "k8s.io/api", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}},
			wantPath: "k8s.io/api", wantVer: "v0.37.2",
		},
		{
			name:     "replaced by a fork",
			dep:      debug.Module{Path: "k8s.io/pod-security-admission", Version: "v0.36.2", Replace: &debug.Module{Path: "github.com/kyverno/pod-security-admission", Version: "v0.0.0-1"}},
			wantPath: "github.com/kyverno/pod-security-admission", wantVer: "v0.0.0-1",
		},
		{
			name: "nested module of this repository",
			dep: debug.Module{Path: "github.com/truce-dev/truce/engine/kyverno/helper/protocol", Version: "v0.0.0-00010101000000-000000000000",
				Replace: &debug.Module{Path: "./engine/kyverno/helper/protocol"}},
			wantPath: "github.com/truce-dev/truce/engine/kyverno/helper/protocol", wantVer: "v1.2.3",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path, version := depVersion(&tt.dep, "v1.2.3")
			if path != tt.wantPath || version != tt.wantVer {
				t.Fatalf("depVersion = %s %s, want %s %s", path, version, tt.wantPath, tt.wantVer)
			}
		})
	}
}
