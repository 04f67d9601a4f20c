package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	tversion "github.com/truce-dev/truce/internal/version"
)

// truce links Kubernetes, Helm and the Flux libraries: the command names
// each tool the issue asks for, with the version built in.
func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Execute(context.Background(), []string{"version"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"truce ", "go ", "Kubernetes  ", "v1.37.", "Argo CD  ", "Flux kustomize-controller  ", "Flux helm-controller  ", "Helm  ", "v4."} {
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
	if info.Version == "" || info.GoVersion == "" || len(info.Reproduces) < 5 {
		t.Errorf("incomplete: %+v", info)
	}

	if code := Execute(context.Background(), []string{"version", "-o", "yaml"}, nil, &out, &errb); code != exitFailure {
		t.Errorf("unknown -o: exit %d, want %d", code, exitFailure)
	}
}
