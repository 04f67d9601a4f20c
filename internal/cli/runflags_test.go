package cli

import (
	"strings"
	"testing"
)

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
		notInErr string
		notInOut string
	}{
		{name: "negative timeout", args: []string{"check", "--timeout", "-1s", "../../examples/image-mirror"}, wantCode: 2, wantErr: "--timeout -1s is negative"},
		{name: "lint: negative timeout", args: []string{"lint", "--timeout", "-1s", "../../examples/image-mirror"}, wantCode: 2, wantErr: "is negative"},
		{name: "time limit gone before anything is judged", args: []string{"check", "--timeout", "1ns", "../../examples/image-mirror"}, wantCode: 2,
			wantErr: "time limit (--timeout) ran out", notInOut: "Synced"},
		{name: "diff: negative timeout", args: []string{"diff", "--timeout", "-1s", "../../examples/image-mirror/app"}, wantCode: 2, wantErr: "is negative"},
		{name: "diff: time limit gone before reading", args: []string{"diff", "--timeout", "1ns", "../../examples/image-mirror/app", "-c", "../../examples/image-mirror/cluster"}, wantCode: 2,
			wantErr: "time limit (--timeout) ran out", notInOut: "in sync"},
		// stderr is not a terminal here: no progress, and none in stdout.
		{name: "no progress off a terminal", args: []string{"check", "../../examples/image-mirror"}, wantCode: 1,
			wantOut: "Loop", notInErr: "truce: ", notInOut: "truce: simulating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			if !strings.Contains(out, tt.wantOut) || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stdout %q\nstderr %q\nwant %q in stdout and %q in stderr", out, errOut, tt.wantOut, tt.wantErr)
			}
			if tt.notInErr != "" && strings.Contains(errOut, tt.notInErr) {
				t.Errorf("stderr has %q: %s", tt.notInErr, errOut)
			}
			if tt.notInOut != "" && strings.Contains(out, tt.notInOut) {
				t.Errorf("stdout has %q: %s", tt.notInOut, out)
			}
		})
	}
}
