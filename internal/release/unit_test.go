package release

import (
	"os"
	"path/filepath"
	"runtime"
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
