package k8scel

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyIsUpstream: every file here is Gatekeeper's file of the version
// go.mod pins with only the changes README.md names.
func TestCopyIsUpstream(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/gatekeeper/v3").Output()
	if err != nil {
		t.Fatalf("finding Gatekeeper's module: %v", err)
	}
	upstream := filepath.Join(strings.TrimSpace(string(out)), "pkg", "drivers", "k8scel")
	changes := map[string][][2]string{
		"driver.go": {{`"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"`,
			`"github.com/truce-dev/truce/engine/gatekeeper/internal/k8scel/transform"`}},
		"new.go":                    nil,
		"args.go":                   nil,
		"transform/cel_snippets.go": nil,
		"transform/request.go": {
			{"VersionedOldObject: wrapped.GetOldObject(),", "VersionedOldObject: admission.NewLazyObject(wrapped.GetOldObject()),"},
			{"VersionedObject:    wrapped.GetObject(),", "VersionedObject:    admission.NewLazyObject(wrapped.GetObject()),"},
		},
	}
	for file, subs := range changes {
		orig, err := os.ReadFile(filepath.Join(upstream, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		want := string(orig)
		for _, s := range subs {
			if !strings.Contains(want, s[0]) {
				t.Errorf("%s: upstream no longer has %q", file, s[0])
			}
			want = strings.ReplaceAll(want, s[0], s[1])
		}
		formatted, err := format.Source([]byte(want))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !bytes.Equal(got, formatted) {
			t.Errorf("%s differs from Gatekeeper's copy beyond the changes README.md names", file)
		}
	}
}
