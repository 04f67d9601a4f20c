package isolate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// Jobs of the tests, served by the test binary re-executed as a worker.
func init() {
	Register("test.echo", func(p []byte) ([]byte, error) { return p, nil })
	Register("test.pid", func([]byte) ([]byte, error) { return []byte(strconv.Itoa(os.Getpid())), nil })
	Register("test.fail", func(p []byte) ([]byte, error) { return nil, errors.New("failed: " + string(p)) })
	Register("test.panic", func([]byte) ([]byte, error) { panic("boom") })
	Register("test.exit", func([]byte) ([]byte, error) { os.Exit(3); return nil, nil })
	Register("test.recurse", func([]byte) ([]byte, error) { return []byte(strconv.Itoa(recurse(0))), nil })
	Register("test.sleep", func(p []byte) ([]byte, error) {
		d, err := time.ParseDuration(string(p))
		time.Sleep(d)
		return nil, err
	})
	Register("test.stdout", func(p []byte) ([]byte, error) {
		fmt.Println("stray output that must not break the protocol")
		return p, nil
	})
}

// recurse never ends; its frames are large so that the stack limit is
// reached quickly.
func recurse(n int) int {
	if n < 0 { // never: n only grows
		return 0
	}
	var buf [512]byte
	buf[n%len(buf)] = byte(n)
	return recurse(n+1) + int(buf[(n*7)%len(buf)])
}

func do(t *testing.T, r *Runner, job, payload string) (string, error) {
	t.Helper()
	out, err := r.Do(context.Background(), job, []byte(payload))
	return string(out), err
}

func pid(t *testing.T, r *Runner) int {
	t.Helper()
	out, err := do(t, r, "test.pid", "")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func newRunner(t *testing.T, opts Options) *Runner {
	r := NewRunner(opts)
	t.Cleanup(func() { r.Close() })
	return r
}

func TestOneWorkerServesManyJobs(t *testing.T) {
	r := newRunner(t, Options{})
	first := pid(t, r)
	for i := range 50 {
		want := strings.Repeat("x", i*1000)
		if got, err := do(t, r, "test.echo", want); err != nil || got != want {
			t.Fatalf("echo %d: got %d bytes, %v", i, len(got), err)
		}
	}
	if got := pid(t, r); got != first {
		t.Errorf("worker %d replaced by %d", first, got)
	}
	if s := r.Stats(); s.Started != 1 || s.Jobs != 52 {
		t.Errorf("stats = %+v, want 1 worker and 52 jobs", s)
	}
	if first == os.Getpid() {
		t.Error("the job ran in this process")
	}
}

func TestJobErrorsKeepTheWorker(t *testing.T) {
	r := newRunner(t, Options{})
	first := pid(t, r)
	tests := []struct{ job, want string }{
		{"test.fail", "failed: why"},
		{"test.panic", "panic in test.panic: boom"},
		{"test.nosuchjob", `unknown job "test.nosuchjob"`},
	}
	for _, tc := range tests {
		_, err := do(t, r, tc.job, "why")
		var je *JobError
		if !errors.As(err, &je) || je.Msg != tc.want {
			t.Errorf("%s: error = %v, want JobError %q", tc.job, err, tc.want)
		}
	}
	if got := pid(t, r); got != first {
		t.Errorf("worker %d replaced by %d after job errors", first, got)
	}
	if got, err := do(t, r, "test.stdout", "ok"); err != nil || got != "ok" {
		t.Errorf("a job printing to stdout: %q, %v", got, err)
	}
}

func TestWorkerDeath(t *testing.T) {
	tests := []struct {
		job        string
		kind       error
		wantReason string
		wantDetail string
	}{
		{job: "test.recurse", kind: ErrOutOfStack, wantReason: "ran out of stack", wantDetail: "stack exceeds"},
		{job: "test.exit", wantReason: "exit status 3"},
	}
	for _, tc := range tests {
		t.Run(tc.job, func(t *testing.T) {
			r := newRunner(t, Options{})
			first := pid(t, r)
			_, err := do(t, r, tc.job, "")
			var we *WorkerError
			if !errors.As(err, &we) {
				t.Fatalf("error = %v, want a *WorkerError", err)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("error = %v, want it to be %v", err, tc.kind)
			}
			if we.Job != tc.job || we.Reason != tc.wantReason || !strings.Contains(we.Detail, tc.wantDetail) {
				t.Errorf("error = %+v, want job %s, reason %q, detail containing %q", we, tc.job, tc.wantReason, tc.wantDetail)
			}
			if strings.Contains(we.Detail, "[running]") {
				t.Errorf("detail carries the goroutine dump: %q", we.Detail)
			}
			// The next job gets a new worker.
			if got := pid(t, r); got == first || alive(first) {
				t.Errorf("worker %d after the death of %d (alive: %v)", got, first, alive(first))
			}
			if s := r.Stats(); s.Started != 2 {
				t.Errorf("started %d workers, want 2", s.Started)
			}
		})
	}
}

func TestWorkerKilledMidJob(t *testing.T) {
	r := newRunner(t, Options{})
	victim := pid(t, r)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = syscall.Kill(victim, syscall.SIGKILL)
	}()
	_, err := do(t, r, "test.sleep", "1m")
	var we *WorkerError
	if !errors.As(err, &we) || !strings.Contains(we.Reason, "signal: killed") {
		t.Fatalf("error = %v, want the worker killed", err)
	}
	if got, err := do(t, r, "test.echo", "again"); err != nil || got != "again" {
		t.Fatalf("next job: %q, %v", got, err)
	}
}

func TestContextEndKillsTheWorker(t *testing.T) {
	r := newRunner(t, Options{})
	first := pid(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Do(ctx, "test.sleep", []byte("1m"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Do returned after %v", d)
	}
	if alive(first) {
		t.Errorf("worker %d still runs after the deadline", first)
	}
	if got := pid(t, r); got == first {
		t.Error("the killed worker was reused")
	}

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Do(canceled, "test.echo", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	tests := []struct{ name, exe string }{
		{"exits at once", "/bin/true"},
		{"prints something else", "/bin/ls"},
		{"does not exist", "/nonexistent/truce"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, Options{Executable: tc.exe, HandshakeTimeout: 5 * time.Second})
			for range 2 {
				if _, err := do(t, r, "test.echo", "x"); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("error = %v, want ErrUnavailable", err)
				}
			}
			if s := r.Stats(); s.Started != 0 || s.Jobs != 0 {
				t.Errorf("stats = %+v", s)
			}
		})
	}
}

func TestConcurrentJobs(t *testing.T) {
	r := newRunner(t, Options{MaxWorkers: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				want := fmt.Sprint(g, "-", i)
				got, err := r.Do(context.Background(), "test.echo", []byte(want))
				if err == nil && string(got) != want {
					err = fmt.Errorf("got %q, want %q", got, want)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := r.Stats(); s.Started > 2 || s.Jobs != 40 {
		t.Errorf("stats = %+v, want at most 2 workers and 40 jobs", s)
	}
}

func TestFirstLines(t *testing.T) {
	tests := []struct{ stderr, want string }{
		{"", ""},
		{"warning: x\n", "warning: x"},
		{"noise\nruntime: goroutine stack exceeds 268435456-byte limit\nruntime: sp=0x1 stack=[0x2]\nfatal error: stack overflow\n\ngoroutine 1 [running]:\n",
			"runtime: goroutine stack exceeds 268435456-byte limit; fatal error: stack overflow"},
		{"panic: boom\n\ngoroutine 7 [running]:\nmain.f()\n", "panic: boom; goroutine 7 [running]:"},
	}
	for _, tc := range tests {
		if got := firstLines([]byte(tc.stderr)); got != tc.want {
			t.Errorf("firstLines(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}

func TestFrames(t *testing.T) {
	var b bytes.Buffer
	for _, body := range [][]byte{nil, []byte("a"), bytes.Repeat([]byte("z"), 70000)} {
		if err := writeFrame(&b, body); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(&b)
	for _, want := range []int{0, 1, 70000} {
		body, err := readFrame(r, MaxFrame)
		if err != nil || len(body) != want {
			t.Fatalf("frame of %d bytes: got %d, %v", want, len(body), err)
		}
	}
	if _, err := readFrame(r, MaxFrame); err == nil || err.Error() != "EOF" {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
	big := bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}))
	if _, err := readFrame(big, MaxFrame); !errors.Is(err, errFrameTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
	cut := bufio.NewReader(bytes.NewReader([]byte{0, 0, 0, 5, 'a'}))
	if _, err := readFrame(cut, MaxFrame); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("cut frame: %v", err)
	}
}

// FuzzFrames decodes arbitrary input as the worker and the parent read
// it: no panic, no frame beyond the limit, and requests round-trip.
func FuzzFrames(f *testing.F) {
	var b bytes.Buffer
	_ = writeFrame(&b, encodeRequest("helm.engine", []byte("payload")))
	_ = writeFrame(&b, encodeResponse([]byte("ok"), nil))
	_ = writeFrame(&b, encodeResponse(nil, errors.New("bad")))
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 1, 0xff})
	f.Add([]byte{0, 0, 0, 2, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			body, err := readFrame(r, 1<<16)
			if err != nil {
				return
			}
			if len(body) > 1<<16 {
				t.Fatalf("frame of %d bytes", len(body))
			}
			if job, payload, err := decodeRequest(body); err == nil {
				j2, p2, err := decodeRequest(encodeRequest(job, payload))
				if err != nil || j2 != job || !bytes.Equal(p2, payload) {
					t.Fatalf("request %q %q does not round-trip: %q %q %v", job, payload, j2, p2, err)
				}
			}
			_, _ = decodeResponse(body)
		}
	})
}

// BenchmarkRoundTrip is the fixed cost of a job: framing, two pipe writes
// and the worker's turn, with a reused worker.
func BenchmarkRoundTrip(b *testing.B) {
	r := NewRunner(Options{})
	defer r.Close()
	for _, size := range []int{16, 64 << 10} {
		payload := bytes.Repeat([]byte("x"), size)
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := r.Do(context.Background(), "test.echo", payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
