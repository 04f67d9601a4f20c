package kyverno_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// helperPath is the truce-kyverno the tests built.
var helperPath string

// TestMain builds the helper once, from the nested module, into a
// temporary directory. A cold build of Kyverno takes minutes (see
// docs/kyverno.md); the Go build cache makes later ones quick.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "truce-kyverno-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	helperPath = filepath.Join(dir, "truce-kyverno")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", helperPath, "./cmd/truce-kyverno")
	cmd.Dir = "helper"
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the Kyverno helper: %v\n%s", err, out)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "built the Kyverno helper in %s\n", time.Since(start).Round(time.Second))
	}
	return m.Run()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
