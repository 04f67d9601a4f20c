package isolate

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

var (
	// ErrUnavailable means no worker can run jobs in this process; the
	// caller evaluates in process instead.
	ErrUnavailable = errors.New("no worker process to evaluate templates in")
	// ErrOutOfStack classifies a *WorkerError: the worker's stack reached
	// its limit, which for templates means a recursion without end.
	ErrOutOfStack = errors.New("ran out of stack")
	// ErrOutOfMemory classifies a *WorkerError: the worker could not
	// allocate memory.
	ErrOutOfMemory = errors.New("ran out of memory")
)

// JobError is a job's own failure, as its handler reported it in the
// worker (a template error, a Jsonnet error).
type JobError struct {
	Msg string
}

func (e *JobError) Error() string { return e.Msg }

// WorkerError is the death of the worker running a job: it exited, was
// killed, or wrote something that is not a frame.
type WorkerError struct {
	// Job is the job's name.
	Job string
	// Reason is why, briefly: "ran out of stack", "exit status 2",
	// "signal: killed", "malformed response: ...".
	Reason string
	// Detail is the first lines the worker printed to its stderr, if any.
	Detail string
	// Kind is ErrOutOfStack, ErrOutOfMemory or nil.
	Kind error
}

func (e *WorkerError) Error() string {
	msg := "worker process died running " + e.Job + ": " + e.Reason
	if e.Detail != "" && !strings.Contains(e.Reason, e.Detail) {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func (e *WorkerError) Unwrap() error { return e.Kind }

// maxDetailLines bounds WorkerError.Detail; a fatal error prints the
// message first and then a goroutine dump nobody asked for.
const maxDetailLines = 2

// deathError describes how a worker ended: waitErr is what Wait returned,
// stderr what it printed, cause what the parent saw (a read error).
func deathError(job string, waitErr error, stderr []byte, cause error) *WorkerError {
	e := &WorkerError{Job: job, Detail: firstLines(stderr)}
	switch {
	case bytes.Contains(stderr, []byte("stack overflow")) || bytes.Contains(stderr, []byte("goroutine stack exceeds")):
		e.Reason, e.Kind = ErrOutOfStack.Error(), ErrOutOfStack
	case bytes.Contains(stderr, []byte("out of memory")):
		e.Reason, e.Kind = ErrOutOfMemory.Error(), ErrOutOfMemory
	case waitErr != nil:
		e.Reason = waitErr.Error()
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				e.Reason += " (possibly by the kernel's out-of-memory killer)"
			}
		}
	case cause != nil:
		e.Reason = cause.Error()
	default:
		e.Reason = "exited"
	}
	return e
}

// firstLines returns the first lines of a fatal error or panic in stderr
// (else of stderr), at most maxDetailLines of them.
func firstLines(stderr []byte) string {
	for _, mark := range []string{"runtime: goroutine stack exceeds", "fatal error:", "panic:"} {
		if i := bytes.Index(stderr, []byte(mark)); i >= 0 {
			stderr = stderr[i:]
			break
		}
	}
	var lines []string
	for line := range strings.Lines(string(stderr)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "runtime: sp=") {
			continue
		}
		if lines = append(lines, line); len(lines) == maxDetailLines {
			break
		}
	}
	return strings.Join(lines, "; ")
}

// capBuffer keeps the first max bytes written since the last reset and
// discards the rest, so a worker's goroutine dump costs no memory.
type capBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *capBuffer) reset() {
	b.mu.Lock()
	b.buf = b.buf[:0]
	b.mu.Unlock()
}

func (b *capBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}
