package schema

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// TestEmbeddedDocumentsMatchPinnedModule fails when go.mod moves
// k8s.io/kubernetes to another version without `go generate ./schema`.
func TestEmbeddedDocumentsMatchPinnedModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "api", "openapi-spec", "v3")
	for _, gv := range []k8sschema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "admissionregistration.k8s.io", Version: "v1"}} {
		want, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(strings.TrimPrefix(builtinDocPath(gv), "openapi/"), ".gz")))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readBuiltinDoc(gv)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("embedded OpenAPI document for %s differs from the pinned k8s.io/kubernetes module: run go generate ./schema", gv)
		}
	}
}
