package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/truce-dev/truce/progress"
)

// runFlags bound a long run and say whether it shows progress: --timeout
// and --quiet of check, fix, diff and lint.
type runFlags struct {
	timeout time.Duration
	quiet   bool
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.timeout, "timeout", 0, "bound the whole run (e.g. 10m); what is not done by then is reported Unpredictable and the exit status is 2 (0: no limit)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "show no progress on stderr (progress is shown only when stderr is a terminal)")
}

// validate refuses a negative --timeout.
func (f *runFlags) validate() error {
	if f.timeout < 0 {
		return fmt.Errorf("--timeout %s is negative", f.timeout)
	}
	return nil
}

// longRun is one bounded run: its context, the progress sink (nil when none
// is shown) and what to do when it ends.
type longRun struct {
	ctx    context.Context
	sink   progress.Sink
	cancel context.CancelFunc
	line   *progress.Line
}

// start begins a run of cmd: the context bounded by --timeout, and a
// progress line on stderr when it is a terminal and --quiet is not set.
func (f *runFlags) start(cmd *cobra.Command) *longRun {
	ctx, cancel := cmd.Context(), context.CancelFunc(func() {})
	if f.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
	}
	r := &longRun{ctx: ctx, cancel: cancel}
	if f.quiet {
		return r
	}
	if w, width, ok := terminal(cmd.ErrOrStderr()); ok {
		r.line = progress.NewLine(w, time.Now)
		r.line.Width = width
		r.sink = r.line
	}
	return r
}

// stop erases the progress line (before the report is printed) and
// releases the run's context.
func (r *longRun) stop() {
	if r.line != nil {
		r.line.Close()
	}
	r.cancel()
}

// timedOut reports whether the run's time limit ran out.
func (r *longRun) timedOut() bool { return errors.Is(r.ctx.Err(), context.DeadlineExceeded) }

// result is the error a command returns after printing what it finished:
// exit 2 when the time limit cut the run short, else err.
func (r *longRun) result(err error) error {
	if err == nil && r.timedOut() {
		return exitError{exitFailure}
	}
	return err
}

// terminal returns w as a terminal and its width, when it is one.
func terminal(w io.Writer) (io.Writer, int, bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, 0, false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return f, width, true
}

// readError says that the time limit ran out while err happened, when it
// did: nothing was judged yet, so there is nothing to report.
func readError(r *longRun, err error) error {
	var exit exitError
	if err == nil || errors.As(err, &exit) {
		return err
	}
	if r.timedOut() {
		return fmt.Errorf("the run's time limit (--timeout) ran out before anything was judged: %w", err)
	}
	return err
}
