//go:build e2e

// Command localcluster runs the e2e harness's kube-apiserver (with its
// embedded etcd) on loopback until interrupted, so that it can be used by
// hand with kubectl or truce:
//
//	go run -tags e2e ./e2e/cmd/localcluster [--kubeconfig-out FILE]
//
// It prints an `export KUBECONFIG=...` line once the server is ready and
// shuts down cleanly on SIGINT or SIGTERM. The server is the one the
// differential tests use: same flags, same admission plugins, same audit
// policy (the audit log path is printed too).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/truce-dev/truce/e2e/apiserver"
)

func main() {
	kubeconfigOut := flag.String("kubeconfig-out", "localcluster.kubeconfig", "where to write the admin kubeconfig (removed again on shutdown)")
	disable := flag.String("disable-admission-plugins", strings.Join(apiserver.DefaultDisabledAdmissionPlugins, ","), "comma-separated admission plugins to disable")
	dir := flag.String("dir", "", "working directory for etcd data, logs and the audit log (default: a temporary directory, removed on shutdown)")
	logToStderr := flag.Bool("log-to-stderr", false, "copy kube-apiserver and etcd logs to stderr (they always go to DIR/apiserver.log and DIR/etcd.log)")
	flag.Parse()
	if err := run(*kubeconfigOut, *disable, *dir, *logToStderr); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(kubeconfigOut, disable, dir string, logToStderr bool) error {
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	opts := apiserver.Options{Dir: dir}
	if disable != "" {
		opts.DisableAdmissionPlugins = strings.Split(disable, ",")
	} else {
		opts.DisableAdmissionPlugins = []string{}
	}
	if logToStderr {
		opts.LogOutput = os.Stderr
	}
	start := time.Now()
	fmt.Fprintln(os.Stderr, "localcluster: starting etcd and kube-apiserver ...")
	srv, err := apiserver.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "localcluster: shutting down ...")
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster: shutdown:", err)
		}
		fmt.Fprintln(os.Stderr, "localcluster: stopped")
	}()

	path, err := filepath.Abs(kubeconfigOut)
	if err != nil {
		return err
	}
	if err := srv.WriteKubeconfig(path); err != nil {
		return err
	}
	// The token and port die with the server; do not leave a stale file.
	defer os.Remove(path)

	fmt.Fprintf(os.Stderr, "localcluster: ready after %s\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "localcluster: flags: %s\n", strings.Join(opts.Flags(srv.Dir()), " "))
	fmt.Fprintf(os.Stderr, "localcluster: disabled admission plugins: %s\n", strings.Join(srv.DisabledAdmissionPlugins(), ","))
	fmt.Fprintf(os.Stderr, "localcluster: audit log: %s\n", srv.AuditLogPath())
	fmt.Fprintf(os.Stderr, "localcluster: server log: %s\n", srv.LogPath())
	fmt.Fprintln(os.Stderr, "localcluster: press Ctrl-C (SIGINT) or send SIGTERM to stop")
	// The one line on stdout, so `eval "$(... | head -1)"`-style use works.
	fmt.Printf("export KUBECONFIG=%s\n", path)

	<-ctx.Done()
	// A second signal kills the process the default way.
	stopSignals()
	return nil
}
