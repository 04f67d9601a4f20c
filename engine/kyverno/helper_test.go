package kyverno_test

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/engine/kyverno"
)

// A helper that dies is an error naming it, never a panic or a hang.
func TestHelperFailures(t *testing.T) {
	tests := []struct {
		name, path, want string
	}{
		{name: "exits at once", path: "/bin/false", want: "the Kyverno helper /bin/false exited"},
		{name: "missing", path: "/nonexistent/truce-kyverno", want: "starting the Kyverno helper /nonexistent/truce-kyverno"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := kyverno.New(kyverno.Options{HelperPath: tt.path})
			t.Cleanup(eng.Close)
			_, err := eng.Install(testContext(t), objs(t, namespaces, addLabel))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Install: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestFindHelperEnv(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(kyverno.HelperEnv, "/nonexistent/truce-kyverno")
	if _, err := kyverno.FindHelper(); err == nil || !strings.Contains(err.Error(), "TRUCE_KYVERNO=/nonexistent/truce-kyverno") {
		t.Fatalf("FindHelper: %v, want an error naming $TRUCE_KYVERNO", err)
	}
	t.Setenv(kyverno.HelperEnv, helperPath)
	if p, err := kyverno.FindHelper(); err != nil || p != helperPath {
		t.Fatalf("FindHelper = %q, %v; want $TRUCE_KYVERNO, %s", p, err, helperPath)
	}
	t.Setenv(kyverno.HelperEnv, "")
	if _, err := kyverno.FindHelper(); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("FindHelper: %v, want an error saying how to build the helper", err)
	}
}
