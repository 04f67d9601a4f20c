//go:build e2e

package apiserver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/kubernetes/test/utils/ktesting"
)

var _ ktesting.TB = (*processTB)(nil)

// processTB implements ktesting.TB (what StartTestServer wants) for a server
// that outlives any single test: it is started once per test binary (from
// TestMain or a sync.Once) or by the localcluster command, where no
// *testing.T exists or where the server must not die with the first test
// that happened to start it.
//
// Logs go to the harness's log writer; errors are remembered and returned
// by err(); Fatal panics with a fatalError that capture turns back into an
// error (StartTestServer only calls Fatal during setup, on this goroutine);
// Cleanup functions run, last first, in runCleanups (called by Stop).
type processTB struct {
	dir string
	out io.Writer

	mu       sync.Mutex
	errs     []error
	cleanups []func()
	tmpN     int
}

type fatalError struct{ msg string }

func newProcessTB(dir string, out io.Writer) *processTB {
	return &processTB{dir: dir, out: out}
}

// capture runs f and turns a Fatal inside it into an error.
func (t *processTB) capture(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = errors.New(fe.msg)
		}
	}()
	return f()
}

func (t *processTB) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return errors.Join(t.errs...)
}

func (t *processTB) runCleanups() error {
	t.mu.Lock()
	cleanups := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	return nil
}

func (t *processTB) log(msg string) {
	fmt.Fprintf(t.out, "%s %s\n", time.Now().Format("15:04:05.000"), msg)
}

func (t *processTB) Attr(key, value string) { t.log(fmt.Sprintf("attr %s=%s", key, value)) }
func (t *processTB) Chdir(dir string) {
	if err := os.Chdir(dir); err != nil {
		t.Fatalf("chdir: %v", err)
	}
}
func (t *processTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *processTB) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }
func (t *processTB) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.log("ERROR: " + msg)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, errors.New(msg))
}
func (t *processTB) Fail() { t.Errorf("failed") }
func (t *processTB) FailNow() {
	panic(fatalError{"FailNow called"})
}
func (t *processTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.errs) > 0
}
func (t *processTB) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *processTB) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.log("FATAL: " + msg)
	panic(fatalError{msg})
}
func (t *processTB) Helper()                          {}
func (t *processTB) Log(args ...any)                  { t.log(fmt.Sprint(args...)) }
func (t *processTB) Logf(format string, args ...any)  { t.log(fmt.Sprintf(format, args...)) }
func (t *processTB) Name() string                     { return "truce-e2e-apiserver" }
func (t *processTB) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (t *processTB) Skip(args ...any)                 { t.Fatalf("skip: %s", fmt.Sprint(args...)) }
func (t *processTB) Skipf(format string, args ...any) { t.Fatalf("skip: "+format, args...) }
func (t *processTB) SkipNow()                         { t.Fatalf("skip") }
func (t *processTB) Skipped() bool                    { return false }
func (t *processTB) TempDir() string {
	t.mu.Lock()
	t.tmpN++
	n := t.tmpN
	t.mu.Unlock()
	dir := filepath.Join(t.dir, fmt.Sprintf("tmp%d", n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	return dir
}
