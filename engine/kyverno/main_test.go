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

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno"
)

// helperPath is the truce-kyverno the tests built.
var helperPath string

// TestMain builds the helper once, from the nested module, into a
// temporary directory, unless $TRUCE_KYVERNO names one already built (make
// unit builds bin/truce-kyverno once for every package's tests). A cold
// build of Kyverno takes minutes (see docs/kyverno.md); the Go build cache
// makes later ones quick.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	// As truce runs (--allow-privileged defaults to true): the CLI
	// corpus's privileged Pods reach Kyverno, as in kubeadm and kind.
	if err := admission.SetAllowPrivileged(true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if p := os.Getenv(kyverno.HelperEnv); p != "" {
		helperPath = p
		return m.Run()
	}
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
