package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// downloaded is the part of `go mod download -json` output gen uses.
type downloaded struct {
	Path, Version string
	Zip           string
	Sum           string
	Error         string
}

// download fetches a module's zip into the module cache and returns its
// path. The zip is verified against go.sum or the checksum database before
// `go mod download` reports Zip and Sum; extracting it may still fail (a
// module requiring a newer Go than the one running, with GOTOOLCHAIN=local),
// which gen does not need, so that error is ignored once the zip is there.
func download(ctx context.Context, p pin) (string, error) {
	mv := p.Path + "@" + p.Version
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mv)
	// Outside any module, so the download cannot touch truce's go.mod/go.sum.
	cmd.Dir = os.TempDir()
	// GOTOOLCHAIN=local: the zip is all gen needs, so a module requiring a
	// newer Go must not make go download that toolchain.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on", "GOTOOLCHAIN=local")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var d downloaded
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
		return "", fmt.Errorf("go mod download %s: %v: %s", mv, runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	if d.Zip == "" || d.Sum == "" {
		return "", fmt.Errorf("go mod download %s: %s", mv, d.Error)
	}
	if _, err := os.Stat(d.Zip); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mv, err)
	}
	return d.Zip, nil
}
