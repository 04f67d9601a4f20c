// Command truce runs Kubernetes admission offline and tells GitOps drift
// caused by admission before it happens.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/truce-dev/truce/internal/cli"
	"github.com/truce-dev/truce/render/isolate"
)

func main() {
	// Re-executed as a worker for Helm templates and Jsonnet programs,
	// truce serves jobs and exits here (see package isolate).
	isolate.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
