// Package cli implements truce's commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/truce-dev/truce/admission"
)

// Exit codes, like flux diff: 0 nothing to report, 1 something was found
// (a denied write), 2 the command could not do its job.
const (
	exitOK      = 0
	exitFound   = 1
	exitFailure = 2
)

// exitError carries an exit code through cobra without printing twice.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Execute runs truce with args and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// The upstream admission plugins log through klog; a command's output is
	// its results, so their progress messages are dropped.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("alsologtostderr", "false")
	_ = klogFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(stderr, "error:", err)
	return exitFailure
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "truce",
		Short:         "Kubernetes admission and GitOps drift, computed together",
		Long:          "truce answers what kube-apiserver 1.37 would store for a manifest, and whether a GitOps tool will settle or fight admission over it.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// kube-apiserver's own default is false, but kubeadm, kind, k3s and
	// the managed services run with true: false would refuse every
	// privileged CNI, CSI and monitoring DaemonSet of a real repository.
	allowPrivileged := root.PersistentFlags().Bool("allow-privileged", true,
		"the cluster's kube-apiserver --allow-privileged (kube-apiserver's default is false; kubeadm, kind and managed clusters set true): with false, Pods and Pod templates with privileged containers are invalid")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		return admission.SetAllowPrivileged(*allowPrivileged)
	}
	root.AddCommand(newAdmitCommand())
	root.AddCommand(newDiffCommand())
	root.AddCommand(newCheckCommand())
	root.AddCommand(newFixCommand())
	root.AddCommand(newWebhookCommand())
	root.AddCommand(newLintCommand())
	root.AddCommand(newSyncCommand())
	root.AddCommand(newVersionCommand())
	return root
}
