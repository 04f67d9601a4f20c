package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// Progress goes to stderr when it is a terminal (a pseudo-terminal here),
// is erased before the report, and never reaches stdout or machine
// formats.
func TestProgressOnTerminal(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// want is in what the terminal received; empty: nothing at all.
		want    string
		wantOut string
	}{
		{name: "check", args: []string{"check", "../../examples/image-mirror"}, want: "truce: simulating", wantOut: "Loop"},
		{name: "check json", args: []string{"check", "--format", "json", "../../examples/image-mirror"}, want: "truce: simulating", wantOut: `"verdict": "Loop"`},
		{name: "diff", args: []string{"diff", "../../examples/image-mirror/app", "-c", "../../examples/image-mirror/cluster", "--strategy", "predicted"}, want: "truce: comparing", wantOut: "drifted"},
		{name: "lint", args: []string{"lint", "../../examples/image-mirror"}, want: "truce: linting"},
		{name: "check --quiet", args: []string{"check", "-q", "../../examples/image-mirror"}, wantOut: "Loop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal here: %v", err)
			}
			defer ptmx.Close()
			var term bytes.Buffer
			read := make(chan struct{})
			go func() {
				// Reading ends with EIO once the terminal side closes.
				_, _ = io.Copy(&term, ptmx)
				close(read)
			}()
			var out bytes.Buffer
			Execute(context.Background(), tt.args, strings.NewReader(""), &out, tty)
			tty.Close()
			<-read
			got := term.String()
			switch {
			case tt.want == "" && got != "":
				t.Errorf("the terminal received %q, want nothing", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("the terminal received %q, want %q in it", got, tt.want)
			case tt.want != "" && !strings.HasSuffix(got, "\r\x1b[K"):
				t.Errorf("the progress line is not erased at the end: %q", got)
			}
			if strings.Contains(out.String(), "truce: ") || strings.Contains(out.String(), "\x1b[K") {
				t.Errorf("progress reached stdout: %q", out.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout %q, want %q in it", out.String(), tt.wantOut)
			}
		})
	}
}
