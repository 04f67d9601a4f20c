package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Target is a platform truce is built for.
type Target struct{ OS, Arch string }

func (t Target) String() string { return t.OS + "/" + t.Arch }

// ParseTarget reads "linux/amd64".
func ParseTarget(s string) (Target, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return Target{}, fmt.Errorf("platform %q: want OS/ARCH, as linux/amd64", s)
	}
	return Target{OS: os, Arch: arch}, nil
}

// Targets are the platforms of the release binaries.
func Targets() []Target {
	return []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
}

// ImageTargets are the platforms of the image.
func ImageTargets() []Target { return []Target{{"linux", "amd64"}, {"linux", "arm64"}} }

// Stamp is what a build is told about itself.
type Stamp struct {
	// Version is the release tag (v0.2.0) or a snapshot's name.
	Version string
	// Commit is the Git revision built.
	Commit string
}

// versionPkg holds the variables -X sets (internal/version).
const versionPkg = "github.com/truce-dev/truce/internal/version"

// The Kyverno helper: its executable's name (truce looks for it next to
// itself, engine/kyverno.HelperName), its module within truce's and its
// command there.
const (
	HelperName   = "truce-kyverno"
	HelperModule = "engine/kyverno/helper"
	helperCmd    = "./cmd/truce-kyverno"
)

// Build compiles ./cmd/truce of the module in moduleDir for t into out: a
// static binary (no cgo) without the build machine's paths, stamped with s.
func Build(ctx context.Context, moduleDir string, t Target, s Stamp, out string) error {
	ldflags := []string{"-s", "-w"}
	if s.Version != "" {
		ldflags = append(ldflags, "-X", versionPkg+".version="+s.Version)
	}
	if s.Commit != "" {
		ldflags = append(ldflags, "-X", versionPkg+".commit="+s.Commit)
	}
	return goBuild(ctx, moduleDir, "./cmd/truce", t, ldflags, out)
}

// buildHelper compiles the Kyverno helper from its own module
// (HelperModule under truce's moduleDir) for t into out, static and
// -trimpath as truce. `make helper` compiles with the same settings for
// the build machine, so a release or snapshot for it reuses those
// compiled packages (Kyverno's are ~17 CPU-minutes cold) and only links:
// -ldflags reach the linker alone. The helper has no version to stamp.
func buildHelper(ctx context.Context, moduleDir string, t Target, out string) error {
	return goBuild(ctx, filepath.Join(moduleDir, HelperModule), helperCmd, t, []string{"-s", "-w"}, out)
}

// BuildBoth builds truce and its Kyverno helper for t into dir, as
// dir/truce and dir/truce-kyverno (the names they are installed by, side
// by side, where truce looks for the helper), and returns their paths.
func BuildBoth(ctx context.Context, moduleDir string, t Target, s Stamp, dir string) (bin, helper string, err error) {
	bin, helper = filepath.Join(dir, "truce"), filepath.Join(dir, HelperName)
	if err := Build(ctx, moduleDir, t, s, bin); err != nil {
		return "", "", err
	}
	if err := buildHelper(ctx, moduleDir, t, helper); err != nil {
		return "", "", err
	}
	return bin, helper, nil
}

// goBuild builds pkg of the module in dir for t, without cgo or the build
// machine's paths.
func goBuild(ctx context.Context, dir, pkg string, t Target, ldflags []string, out string) error {
	// The build runs in dir, which is not the caller's directory.
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-ldflags", strings.Join(ldflags, " "), "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for %s (in %s): %w\n%s", path.Base(pkg), t, dir, err, stderr.Bytes())
	}
	return nil
}

// goTool is the go command to build with: $GO as in the Makefile, else go.
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
