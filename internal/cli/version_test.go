package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	tversion "github.com/truce-dev/truce/internal/version"
)

// A test binary records no dependencies, so Kubernetes and Helm (read from
// the build) are checked on the real binary, in scripts/ci_test.go; Argo CD
// and the Flux controllers come from the embedded CRDs' versions.
func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Execute(context.Background(), []string{"version"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"truce ", "go ", "reproduces:", "Argo CD  ", "Flux kustomize-controller  ", "Flux helm-controller  "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if code := Execute(context.Background(), []string{"version", "-o", "json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var info tversion.Info
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if info.Version == "" || info.GoVersion == "" || len(info.Reproduces) < 3 {
		t.Errorf("incomplete: %+v", info)
	}

	if code := Execute(context.Background(), []string{"version", "-o", "yaml"}, nil, &out, &errb); code != exitFailure {
		t.Errorf("unknown -o: exit %d, want %d", code, exitFailure)
	}
}
