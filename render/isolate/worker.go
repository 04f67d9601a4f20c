package isolate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"
)

// EnvVar set to "1" in a process's environment makes Main serve jobs.
const EnvVar = "TRUCE_ISOLATE_WORKER"

// DefaultMaxStack is a worker's stack limit, a thirty-second of Go's
// 1 GB. Helm's own limit of 1000 nested includes needs under 4 MiB and
// go-jsonnet's 500 frames under 1 MiB; a tpl recursion without end fills
// 32 MiB in about 2 CPU seconds and 0.6 GB of memory (the templates it
// clones), where 1 GB would take minutes and tens of gigabytes.
const DefaultMaxStack = 32 << 20

// maxStackEnv carries Options.MaxStack to the worker.
const maxStackEnv = "TRUCE_ISOLATE_MAX_STACK"

// Handler runs one job in the worker: it decodes the payload, does the
// work and encodes the result. An error is the job's own failure.
type Handler func(payload []byte) ([]byte, error)

// handlers are the jobs a worker serves. Register writes it during package
// initialisation only, before Main or any Runner reads it.
var handlers = map[string]Handler{}

// hooked records that Main ran in this process and returned: the
// executable calls it first, so a re-executed copy will serve jobs.
var hooked atomic.Bool

// Register makes h the handler of the job name. Call it from an init
// function of the package that owns the job, so that the worker (the same
// executable) knows it too. Registering a name twice panics: it is a
// programming error, caught by any test of the package.
func Register(name string, h Handler) {
	if name == "" || h == nil {
		panic("isolate.Register: empty name or nil handler")
	}
	if _, dup := handlers[name]; dup {
		panic("isolate.Register: job " + name + " registered twice")
	}
	handlers[name] = h
}

// Main serves jobs and exits when EnvVar is set; otherwise it returns at
// once and lets Runners of this process start workers. Call it first in
// main and in TestMain of every package whose tests render.
func Main() {
	if os.Getenv(EnvVar) != "1" {
		hooked.Store(true)
		return
	}
	maxStack := DefaultMaxStack
	if n, err := strconv.Atoi(os.Getenv(maxStackEnv)); err == nil && n > 0 {
		maxStack = n
	}
	debug.SetMaxStack(maxStack)
	// Frames go to the real stdout; anything else printing to os.Stdout
	// lands on stderr, where the parent keeps the first lines.
	out := os.Stdout
	os.Stdout = os.Stderr
	go exitWithParent(os.Getppid())
	if err := serve(os.Stdin, out); err != nil {
		fmt.Fprintln(os.Stderr, "isolate worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// exitWithParent ends the worker when its parent is gone: a worker busy
// with a template that never ends would not see its stdin close.
func exitWithParent(ppid int) {
	for range time.Tick(time.Second) {
		if os.Getppid() != ppid {
			os.Exit(2)
		}
	}
}

// serve answers the hello, then one request after another until in ends.
func serve(in io.Reader, out io.Writer) error {
	w := bufio.NewWriter(out)
	if err := writeFrame(w, []byte(hello)); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	r := bufio.NewReader(in)
	for {
		body, err := readFrame(r, MaxFrame)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading a job: %w", err)
		}
		result, jobErr := runJob(body)
		resp := encodeResponse(result, jobErr)
		if len(resp) > MaxFrame {
			resp = encodeResponse(nil, fmt.Errorf("the result is %d bytes, more than the %d-byte limit of the worker's answer", len(resp), MaxFrame))
		}
		if err := writeFrame(w, resp); err != nil {
			return fmt.Errorf("writing a result: %w", err)
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("writing a result: %w", err)
		}
	}
}

// runJob decodes a request and runs its handler; a panic is the job's
// error, as it would be in process.
func runJob(body []byte) (result []byte, err error) {
	job, payload, err := decodeRequest(body)
	if err != nil {
		return nil, err
	}
	h := handlers[job]
	if h == nil {
		return nil, fmt.Errorf("unknown job %q", job)
	}
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("panic in %s: %v", job, r)
		}
	}()
	return h(payload)
}
