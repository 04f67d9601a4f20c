package isolate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Runner.
type Options struct {
	// Executable is the program started as a worker with EnvVar=1. Empty
	// means this process's executable, used only when Main ran in this
	// process (otherwise the executable may not serve jobs at all, and
	// starting it could do anything).
	Executable string
	// MaxWorkers bounds the workers running at once; zero means
	// GOMAXPROCS. Sequential callers use one.
	MaxWorkers int
	// MaxStack is the workers' stack limit in bytes; zero means
	// DefaultMaxStack.
	MaxStack int
	// HandshakeTimeout bounds waiting for a new worker's hello; zero
	// means ten seconds.
	HandshakeTimeout time.Duration
}

// Stats count what a Runner did.
type Stats struct {
	// Started is how many workers were started.
	Started int64
	// Jobs is how many jobs a worker answered, successfully or with the
	// job's own error.
	Jobs int64
}

// Runner hands jobs to worker processes. It is safe for concurrent use.
type Runner struct {
	exe          string
	needHook     bool
	maxStack     int
	handshake    time.Duration
	slots        chan struct{}
	started, run atomic.Int64

	mu     sync.Mutex
	idle   []*worker
	broken error // why workers cannot be started; sticky
	closed bool
}

// NewRunner returns a Runner; it starts no process until the first job.
func NewRunner(opts Options) *Runner {
	r := &Runner{exe: opts.Executable, maxStack: opts.MaxStack, handshake: opts.HandshakeTimeout}
	if r.maxStack <= 0 {
		r.maxStack = DefaultMaxStack
	}
	if r.exe == "" {
		r.needHook = true
	}
	if r.handshake <= 0 {
		r.handshake = 10 * time.Second
	}
	n := opts.MaxWorkers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	r.slots = make(chan struct{}, n)
	return r
}

// Default is the process's Runner, made on first use: its workers live as
// long as the process, so every render of a run shares them.
var Default = sync.OnceValue(func() *Runner { return NewRunner(Options{}) })

// Stats returns what r did so far.
func (r *Runner) Stats() Stats {
	return Stats{Started: r.started.Load(), Jobs: r.run.Load()}
}

// Do runs job with payload in a worker and returns its result. Errors:
// ErrUnavailable when no worker can be started (evaluate in process
// instead); a *JobError for the job's own failure; a *WorkerError when
// the worker died; the context's cause when ctx ended first, in which case
// the worker was killed. A worker that died or was killed is replaced on
// the next job.
func (r *Runner) Do(ctx context.Context, job string, payload []byte) ([]byte, error) {
	if r.needHook && !hooked.Load() {
		return nil, ErrUnavailable
	}
	body := encodeRequest(job, payload)
	if len(body) > MaxFrame {
		return nil, fmt.Errorf("%w: the job is %d bytes, more than the %d-byte limit of a frame", ErrUnavailable, len(body), MaxFrame)
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-r.slots }()
	w, err := r.acquire()
	if err != nil {
		return nil, err
	}
	out, err := w.do(ctx, job, body)
	var jobErr *JobError
	if err == nil || errors.As(err, &jobErr) {
		r.run.Add(1)
		r.release(w)
	} else {
		w.kill()
	}
	return out, err
}

// acquire returns an idle live worker or starts one.
func (r *Runner) acquire() (*worker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: the runner is closed", ErrUnavailable)
	}
	for len(r.idle) > 0 {
		w := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		if !w.exited() {
			return w, nil
		}
		w.kill() // died while idle (killed from outside): start another
	}
	if r.broken != nil {
		return nil, r.broken
	}
	w, err := r.start()
	if err != nil {
		r.broken = fmt.Errorf("%w: %v", ErrUnavailable, err)
		return nil, r.broken
	}
	r.started.Add(1)
	return w, nil
}

func (r *Runner) release(w *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		w.stop()
		return
	}
	r.idle = append(r.idle, w)
}

// Close stops the idle workers and makes later jobs ErrUnavailable.
func (r *Runner) Close() error {
	r.mu.Lock()
	idle := r.idle
	r.idle, r.closed = nil, true
	r.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
	return nil
}

// start starts a worker and waits for its hello.
func (r *Runner) start() (*worker, error) {
	exe := r.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding truce's executable: %w", err)
		}
	}
	w, err := startWorker(exe, r.maxStack)
	if err != nil {
		return nil, err
	}
	got := make(chan error, 1)
	go func() {
		body, err := readFrame(w.out, len(hello))
		if err == nil && string(body) != hello {
			err = errors.New("unexpected hello")
		}
		got <- err
	}()
	timer := time.NewTimer(r.handshake)
	defer timer.Stop()
	select {
	case err = <-got:
	case <-timer.C:
		err = fmt.Errorf("no hello within %v", r.handshake)
	}
	if err != nil {
		w.kill()
		return nil, fmt.Errorf("%s does not serve jobs as a worker: %v", exe, err)
	}
	return w, nil
}

// worker is one child process.
type worker struct {
	cmd    *exec.Cmd
	in     *os.File // the child's stdin
	out    *bufio.Reader
	outF   *os.File
	stderr *capBuffer
	errors chan struct{} // closed when the child's stderr is drained
	done   chan struct{} // closed when the child was waited for
	// waitErr is Wait's result, set before done is closed.
	waitErr error
}

// stderrKeep is how much of a worker's stderr is kept per job.
const stderrKeep = 16 << 10

func startWorker(exe string, maxStack int) (*worker, error) {
	// Pipes of our own rather than exec's: Wait must not close stdout
	// while a dying worker's last frame is still being read.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvVar+"=1", maxStackEnv+"="+strconv.Itoa(maxStack))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	w := &worker{
		cmd: cmd, in: inW, out: bufio.NewReader(outR), outF: outR,
		stderr: &capBuffer{max: stderrKeep},
		errors: make(chan struct{}), done: make(chan struct{}),
	}
	go func() {
		defer close(w.errors)
		defer errR.Close()
		_, _ = io.Copy(w.stderr, errR)
	}()
	go func() {
		w.waitErr = cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// do sends one job (body is its encoded request) and waits for its
// answer, ctx or the worker's death.
func (w *worker) do(ctx context.Context, job string, body []byte) ([]byte, error) {
	w.stderr.reset()
	type answer struct {
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		if err := writeFrame(w.in, body); err != nil {
			got <- answer{err: err}
			return
		}
		body, err := readFrame(w.out, MaxFrame)
		got <- answer{body, err}
	}()
	select {
	case a := <-got:
		if a.err == nil {
			out, err := decodeResponse(a.body)
			var jobErr *JobError
			if err == nil || errors.As(err, &jobErr) {
				return out, err
			}
			a.err = err
		}
		return nil, w.death(job, a.err)
	case <-ctx.Done():
		w.kill()
		<-got // the exchange fails once the worker is gone
		return nil, context.Cause(ctx)
	}
}

// death describes how w ended after an exchange failed, killing it if it
// is still alive (it answered something that is not a frame).
func (w *worker) death(job string, cause error) *WorkerError {
	// A worker that died closed its end of the pipes; being waited for
	// follows at once.
	exited := true
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
		exited = false
	}
	w.kill()
	// The stderr pipe ends with the worker, unless something it started
	// still holds it.
	select {
	case <-w.errors:
	case <-time.After(time.Second):
	}
	if !exited {
		return &WorkerError{Job: job, Reason: "malformed answer: " + cause.Error(), Detail: firstLines(w.stderr.bytes())}
	}
	return deathError(job, w.waitErr, w.stderr.bytes(), cause)
}

// kill ends the worker at once and waits for it.
func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
	w.in.Close()
	w.outF.Close()
}

// stop ends an idle worker by closing its stdin, as the end of a run does.
func (w *worker) stop() {
	w.in.Close()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
	w.outF.Close()
}
