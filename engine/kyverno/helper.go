package kyverno

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// HelperName is the helper's executable: Kyverno's engine, built from the
// module engine/kyverno/helper.
const HelperName = "truce-kyverno"

// HelperEnv names the helper's path; set, it wins over the helper next to
// the truce executable and on PATH (an explicit choice, and how `make
// unit` hands the tests the helper it built once).
const HelperEnv = "TRUCE_KYVERNO"

// LogEnv, set to anything, makes the helper log Kyverno's messages (and
// the stacks of Kyverno's panics) to truce's standard error.
const LogEnv = "TRUCE_KYVERNO_LOG"

// FindHelper returns the helper's path: $TRUCE_KYVERNO, else next to the
// running executable (or to the file it is a symlink to), else on PATH.
func FindHelper() (string, error) {
	if p := os.Getenv(HelperEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", HelperEnv, p, err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p, ok := besideExecutable(exe); ok {
			return p, nil
		}
	}
	if p, err := exec.LookPath(HelperName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the helper %s, which runs Kyverno policies, is neither in $%s, nor next to truce, nor on PATH: "+
		"build it with `make build` (bin/%s) or `cd engine/kyverno/helper && go install ./cmd/truce-kyverno` "+
		"(see docs/kyverno.md)", HelperName, HelperEnv, HelperName)
}

// besideExecutable returns the helper next to exe, else, when exe is a
// symlink, next to the file it leads to: krew runs truce through
// ~/.krew/bin/kubectl-truce, a symlink into the plugin's directory where the
// release's helper lies, and os.Executable does not resolve it on macOS.
func besideExecutable(exe string) (string, bool) {
	dirs := []string{filepath.Dir(exe)}
	if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		p := filepath.Join(d, HelperName)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, true
		}
	}
	return "", false
}

// helper is a running truce-kyverno process. Requests are multiplexed on
// its stdin by id; a reader goroutine hands responses to their callers.
type helper struct {
	path string
	cmd  *exec.Cmd

	wmu   sync.Mutex
	stdin io.WriteCloser

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *protocol.Response
	dead    error // set once the process is gone
	stderr  bytes.Buffer
	exited  chan struct{}
}

func startHelper(path string) (*helper, error) {
	h := &helper{path: path, pending: map[uint64]chan *protocol.Response{}, exited: make(chan struct{})}
	// The helper lives as long as the engine, not as one call's context:
	// Close kills it.
	h.cmd = exec.Command(path) //nolint:gosec // the path is the helper's, found by FindHelper
	h.cmd.Stderr = &lockedWriter{mu: &h.mu, w: &h.stderr}
	if os.Getenv(LogEnv) != "" {
		// Kyverno's logs, asked for: to truce's standard error as well.
		h.cmd.Stderr = io.MultiWriter(os.Stderr, h.cmd.Stderr)
	}
	stdin, err := h.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the Kyverno helper %s: %w", path, err)
	}
	h.stdin = stdin
	go h.read(stdout)
	return h, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 64<<10 {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (h *helper) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		var r protocol.Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			h.fail(fmt.Errorf("the Kyverno helper %s wrote something that is not a response: %w", h.path, err))
			break
		}
		h.mu.Lock()
		ch := h.pending[r.ID]
		delete(h.pending, r.ID)
		h.mu.Unlock()
		if ch != nil {
			ch <- &r
		}
	}
	waitErr := h.cmd.Wait()
	h.mu.Lock()
	stderr := bytes.TrimSpace(h.stderr.Bytes())
	h.mu.Unlock()
	err := fmt.Errorf("the Kyverno helper %s exited (%v)", h.path, waitErr)
	if len(stderr) > 0 {
		err = fmt.Errorf("%w: %s", err, lastLines(stderr, 5))
	}
	h.fail(err)
	close(h.exited)
}

// fail marks the helper dead and fails every waiting call with err.
func (h *helper) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead == nil {
		h.dead = err
	}
	for id, ch := range h.pending {
		close(ch)
		delete(h.pending, id)
	}
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("; ")))
}

// call sends req and waits for its response, ctx or the helper's end.
func (h *helper) call(ctx context.Context, req *protocol.Request) (*protocol.Response, error) {
	ch := make(chan *protocol.Response, 1)
	h.mu.Lock()
	if h.dead != nil {
		err := h.dead
		h.mu.Unlock()
		return nil, err
	}
	h.nextID++
	req.ID, req.V = h.nextID, protocol.ProtocolVersion
	h.pending[req.ID] = ch
	h.mu.Unlock()
	line, err := json.Marshal(req)
	if err != nil {
		h.forget(req.ID)
		return nil, err
	}
	h.wmu.Lock()
	_, err = h.stdin.Write(append(line, '\n'))
	h.wmu.Unlock()
	if err != nil {
		h.forget(req.ID)
		// A helper that died says why better than the broken pipe.
		select {
		case <-h.exited:
			h.mu.Lock()
			defer h.mu.Unlock()
			return nil, h.dead
		case <-ctx.Done():
		}
		return nil, fmt.Errorf("writing to the Kyverno helper %s: %w", h.path, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			h.mu.Lock()
			defer h.mu.Unlock()
			return nil, h.dead
		}
		if r.Error != "" {
			return nil, fmt.Errorf("kyverno %s: %s", req.Op, r.Error)
		}
		return r, nil
	case <-ctx.Done():
		h.forget(req.ID)
		return nil, ctx.Err()
	}
}

func (h *helper) forget(id uint64) {
	h.mu.Lock()
	delete(h.pending, id)
	h.mu.Unlock()
}

// close kills the helper and waits for it.
func (h *helper) close() {
	_ = h.stdin.Close()
	if h.cmd.Process != nil {
		_ = h.cmd.Process.Kill()
	}
	<-h.exited
	h.fail(errors.New("the Kyverno helper was closed"))
}
