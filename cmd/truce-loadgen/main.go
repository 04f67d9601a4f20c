// Command truce-loadgen measures truce's admission webhook handler under
// load, and in the same run the floor: a no-op Go AdmissionReview handler.
// Both are served by the same TLS set-up on loopback and sent the same
// corpus of AdmissionReviews (internal/loadgen) at a fixed concurrency; it
// prints a markdown table of throughput and latency, with ratios to the
// floor, and exits non-zero if any answer was wrong.
//
//	go run ./cmd/truce-loadgen -concurrency 16 -requests 20000
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/truce-dev/truce/internal/loadgen"
)

const (
	exitOK      = 0
	exitErrors  = 1 // a target answered wrongly: the numbers do not count
	exitFailure = 2 // the run could not be made
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// target is one server to measure.
type target struct {
	name string
	// label describes it in the table.
	label string
	// handler builds the handler and returns what releases it.
	handler func(ctx context.Context, policies string) (http.Handler, func(), error)
	// checkAllowed: the target's verdicts are checked against the corpus.
	checkAllowed bool
}

func targets() []target {
	return []target{
		{
			name:  "floor",
			label: "floor (no-op Go handler)",
			handler: func(context.Context, string) (http.Handler, func(), error) {
				return loadgen.NoopHandler(), func() {}, nil
			},
		},
		{
			name:         "truce",
			label:        "truce (20 policies)",
			handler:      truceHandler,
			checkAllowed: true,
		},
	}
}

type options struct {
	concurrency, requests, warmup int
	policies                      string
	http1, check                  bool
	targets                       []string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("truce-loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.concurrency, "concurrency", 16, "requests in flight")
	fs.IntVar(&o.requests, "requests", 20000, "measured requests per target")
	fs.IntVar(&o.warmup, "warmup", 1000, "requests sent to each target first, checked but not measured")
	fs.StringVar(&o.policies, "policies", "", "directory of policies for truce to serve (default: the 20 policies of internal/loadgen, written to a temporary directory)")
	fs.BoolVar(&o.http1, "http1", false, "serve and call over HTTP/1.1 instead of HTTP/2 (which kube-apiserver negotiates)")
	fs.BoolVar(&o.check, "check", true, "check truce's allowed/denied against the corpus's expectations (they hold for the default policies)")
	targetList := fs.String("targets", "floor,truce", "comma-separated targets to measure, in order: floor, truce")
	if err := fs.Parse(args); err != nil {
		return exitFailure
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return exitFailure
	}
	o.targets = strings.Split(*targetList, ",")
	if err := measure(ctx, o, args, targets(), stdout, stderr); err != nil {
		var wrong answersError
		if errors.As(err, &wrong) {
			fmt.Fprintln(stderr, "error:", err)
			return exitErrors
		}
		fmt.Fprintln(stderr, "error:", err)
		return exitFailure
	}
	return exitOK
}

// answersError says that a target answered wrongly.
type answersError struct{ targets []string }

func (e answersError) Error() string {
	return "wrong answers from " + strings.Join(e.targets, ", ") + ": the numbers do not count"
}

// measure runs the targets of all that o selects and prints the table.
func measure(ctx context.Context, o options, args []string, all []target, stdout, stderr io.Writer) error {
	// The admission chain (the corpus's and truce's) logs its progress
	// through klog; the command's output is the table.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("alsologtostderr", "false")
	_ = klogFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)

	var selected []target
	for _, name := range o.targets {
		i := indexOf(all, strings.TrimSpace(name))
		if i < 0 {
			return fmt.Errorf("unknown target %q (want floor or truce)", name)
		}
		selected = append(selected, all[i])
	}

	policies := o.policies
	if policies == "" {
		dir, err := os.MkdirTemp("", "truce-loadgen-policies-")
		if err != nil {
			return fmt.Errorf("a directory for the policies: %w", err)
		}
		defer os.RemoveAll(dir)
		if err := loadgen.Policies(dir); err != nil {
			return err
		}
		policies = dir
	}
	bodies, err := loadgen.Requests(ctx)
	if err != nil {
		return err
	}

	start := time.Now().UTC()
	loadBefore := loadAverage()
	var rows []row
	var wrong []string
	for _, t := range selected {
		res, err := measureTarget(ctx, t, o, policies, bodies)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		rows = append(rows, row{target: t, res: res})
		if res.Errors > 0 {
			wrong = append(wrong, t.name)
			fmt.Fprintf(stderr, "%s: %d of %d requests failed; the first:\n", t.name, res.Errors, res.Requests+o.warmup)
			for _, m := range res.ErrorMessages {
				fmt.Fprintf(stderr, "  %s\n", m)
			}
		}
	}
	report(stdout, reportInput{
		args: args, opts: o, bodies: bodies, rows: rows,
		start: start, loadBefore: loadBefore, loadAfter: loadAverage(),
	})
	if len(wrong) > 0 {
		return answersError{targets: wrong}
	}
	return nil
}

func indexOf(ts []target, name string) int {
	for i, t := range ts {
		if t.name == name {
			return i
		}
	}
	return -1
}

// measureTarget serves one target, runs the load against it and stops it,
// so that no two targets share the machine.
func measureTarget(ctx context.Context, t target, o options, policies string, bodies []loadgen.Request) (*loadgen.Result, error) {
	h, release, err := t.handler(ctx, policies)
	if err != nil {
		return nil, err
	}
	defer release()
	srv, err := loadgen.Serve(h, loadgen.ServeOptions{Concurrency: o.concurrency, HTTP1: o.http1})
	if err != nil {
		return nil, err
	}
	res, runErr := loadgen.Run(ctx, loadgen.Config{
		Client: srv.Client, URL: srv.URL, Bodies: bodies,
		Concurrency: o.concurrency, Requests: o.requests, Warmup: o.warmup,
		CheckAllowed: t.checkAllowed && o.check,
	})
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadgen.CallTimeout)
	defer cancel()
	if err := srv.Close(closeCtx); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

type row struct {
	target target
	res    *loadgen.Result
}

type reportInput struct {
	args                  []string
	opts                  options
	bodies                []loadgen.Request
	rows                  []row
	start                 time.Time
	loadBefore, loadAfter string
}

// report prints the results as markdown, ready for docs/BENCHMARKS.md.
func report(w io.Writer, in reportInput) {
	cmd := "go run ./cmd/truce-loadgen"
	if len(in.args) > 0 {
		cmd += " " + strings.Join(in.args, " ")
	}
	fmt.Fprintf(w, "Command: `%s`\n\n", cmd)
	fmt.Fprintf(w, "Machine: %d CPUs (GOMAXPROCS %d), %s, %s/%s, %s; load average %s before, %s after; %s.\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version(),
		in.loadBefore, in.loadAfter, in.start.Format("2006-01-02 15:04 MST"))
	protocol := ""
	if len(in.rows) > 0 {
		protocol = in.rows[0].res.Protocol
	}
	minSize, maxSize := bodySizes(in.bodies)
	fmt.Fprintf(w, "Load: %d AdmissionReviews in turn (%d to /mutate, %d to /validate, %.1f–%.1f KiB), %s on loopback, %d in flight, %d measured requests per target after %d warm-up; the load generator runs in the same process.\n\n",
		len(in.bodies), countPath(in.bodies, loadgen.MutatePath), countPath(in.bodies, loadgen.ValidatePath),
		float64(minSize)/1024, float64(maxSize)/1024, protocol, in.opts.concurrency, in.opts.requests, in.opts.warmup)

	fmt.Fprintln(w, "| target | requests | errors | req/s | p50 | p99 | req/s floor/target | p50 target/floor | p99 target/floor |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var floor *loadgen.Result
	for _, r := range in.rows {
		if r.target.name == "floor" {
			floor = r.res
		}
	}
	for _, r := range in.rows {
		ratios := "– | – | –"
		if floor != nil {
			ratios = fmt.Sprintf("%.2f× | %.2f× | %.2f×",
				floor.Throughput/r.res.Throughput,
				float64(r.res.P50)/float64(floor.P50),
				float64(r.res.P99)/float64(floor.P99))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %s | %s | %s |\n",
			r.target.label, r.res.Requests, r.res.Errors, r.res.Throughput, ms(r.res.P50), ms(r.res.P99), ratios)
	}
	fmt.Fprintln(w)
	for _, r := range in.rows {
		fmt.Fprintf(w, "- %s: %d allowed, %d denied, %d patched; p90 %s, max %s; %s in %s.\n",
			r.target.name, r.res.Allowed, r.res.Denied, r.res.Patched, ms(r.res.P90), ms(r.res.Max),
			plural(r.res.Requests, "request"), r.res.Duration.Round(time.Millisecond))
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func countPath(bodies []loadgen.Request, path string) int {
	n := 0
	for _, b := range bodies {
		if b.Path == path {
			n++
		}
	}
	return n
}

func bodySizes(bodies []loadgen.Request) (lo, hi int) {
	for i, b := range bodies {
		if i == 0 || len(b.Body) < lo {
			lo = len(b.Body)
		}
		hi = max(hi, len(b.Body))
	}
	return lo, hi
}

// cpuModel is the processor's name from /proc/cpuinfo, "unknown CPU"
// where there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAverage is the 1-, 5- and 15-minute load average, "unknown" where
// /proc/loadavg is missing: other work on the machine skews the numbers.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
