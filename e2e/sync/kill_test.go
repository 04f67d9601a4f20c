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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	gitobject "github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/gitsync"
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
// new local repository and returns its path, and a function that commits
// a new revision without the ConfigMaps numbered drop.
func killRepo(t *testing.T, ns string) (string, func(drop ...int)) {
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
	commit := func(drop ...int) {
		t.Helper()
		var b strings.Builder
		for i := range killConfigMaps {
			if slices.Contains(drop, i) {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("---\n")
			}
			fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  index: %q\n  payload: %q\n",
				cmName(i), ns, fmt.Sprint(i), strings.Repeat(fmt.Sprintf("%03d", i), 100))
		}
		write("configmaps.yaml", b.String())
		sig := &gitobject.Signature{Name: "truce", Email: "truce@example.com", When: time.Date(2026, 11, 30, 12, len(drop), 0, 0, time.UTC)}
		_, err = wt.Commit("fleet", &git.CommitOptions{Author: sig, Committer: sig})
		must(t, err)
	}
	write("namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	commit()
	return dir, commit
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

// syncRunTimeout bounds one run of truce sync --once (a deadline for a
// hung process, not a performance bound: BenchmarkSync measures speed).
const syncRunTimeout = 4 * time.Minute

// TestKillMidSyncConverges: `truce sync --once --prune --status gitsync`
// is killed (SIGKILL) in the middle of writing ~150 ConfigMaps; the same
// command run again completes (exit 0) with every ConfigMap there once
// with Git's content, nothing pruned (a ConfigMap someone else made in the
// namespace included) and the GitSync's inventory listing every object
// once; a third run, at a revision that drops two ConfigMaps, deletes
// exactly those two and writes nothing else.
//
// (The GitSync lives in a namespace of its own that exists before the
// first run: see TestGitSyncInItsOwnNamespace for one the sync creates.)
func TestKillMidSyncConverges(t *testing.T) {
	t.Parallel()
	e := newEnvTimeout(t, "kill", false, 10*time.Minute)
	bin, err := truceBinary()
	if err != nil {
		t.Fatal(err)
	}
	syncNS := e.ns + "-sync"
	_, err = e.srv.Clientset().CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncNS}}, metav1.CreateOptions{})
	must(t, err)
	installGitSyncCRD(e, syncNS)
	repo, commit := killRepo(t, e.ns)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, e.srv.WriteKubeconfig(kubeconfig))
	args := []string{"sync", repo, "--once", "--kubeconfig", kubeconfig, "--status", "gitsync", "--prune",
		"--name", "kill", "--namespace", syncNS, "-o", "json"}

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

	// Someone else's ConfigMap in the namespace: never truce's to prune.
	bystander, err := e.srv.Clientset().CoreV1().ConfigMaps(e.ns).Create(e.ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}, Data: map[string]string{"owner": "someone else"}},
		metav1.CreateOptions{FieldManager: "kubectl-create"})
	must(t, err)

	// The second run, with prune, completes and prunes nothing.
	rep := e.runSync(bin, args, 0)
	created, unchanged := rep.Count(reconcile.Created), rep.Count(reconcile.Unchanged)
	if !rep.Synced || rep.Count(reconcile.Failed) != 0 || created == 0 || created+unchanged != killConfigMaps+1 || rep.Writes != created {
		t.Fatalf("second run: want the %d missing ConfigMaps Created (one write each) and the rest Unchanged: %s",
			killConfigMaps-killedAt, describe(&rep.Result))
	}
	if len(rep.Pruned) != 0 || rep.Count(reconcile.Pruned) != 0 {
		t.Fatalf("second run pruned: %s", describe(&rep.Result))
	}
	rvs := e.checkKillConfigMaps(syncNS, nil, bystander)
	e.checkKillInventory(syncNS, rep.Revision, nil, 0)
	if t.Failed() {
		t.FailNow()
	}

	// The third run is at a revision without cm-000 and cm-149: it
	// deletes them (whichever run created them: the second run's
	// inventory holds both) and writes nothing else.
	commit(0, killConfigMaps-1)
	rep = e.runSync(bin, args, 0)
	wantPruned := []string{cmName(killConfigMaps - 1), cmName(0)} // reverse apply order
	var pruned []string
	for _, ref := range rep.Pruned {
		pruned = append(pruned, ref.Kind+"/"+ref.Namespace+"/"+ref.Name)
	}
	if !rep.Synced || rep.Writes != 2 || rep.Count(reconcile.Unchanged) != killConfigMaps-1 ||
		fmt.Sprint(pruned) != fmt.Sprint([]string{"ConfigMap/" + e.ns + "/" + wantPruned[0], "ConfigMap/" + e.ns + "/" + wantPruned[1]}) {
		t.Fatalf("third run: want %v pruned (2 writes) and %d Unchanged: %s", wantPruned, killConfigMaps-1, describe(&rep.Result))
	}
	after := e.checkKillConfigMaps(syncNS, []int{0, killConfigMaps - 1}, bystander)
	for name, rv := range after {
		if rvs[name] != rv {
			t.Errorf("ConfigMap %s was written by the third run (resourceVersion %s -> %s)", name, rvs[name], rv)
		}
	}
	e.checkKillInventory(syncNS, rep.Revision, []int{0, killConfigMaps - 1}, 2)
}

// checkKillConfigMaps checks the case's ConfigMaps: each one of Git's
// (all but those numbered dropped) there once with Git's content and the
// sync's tracking id, the bystander unchanged, nothing else. It returns
// the resourceVersions by name.
func (e *env) checkKillConfigMaps(syncNS string, dropped []int, bystander *corev1.ConfigMap) map[string]string {
	e.t.Helper()
	t := e.t
	cms, err := e.srv.Clientset().CoreV1().ConfigMaps(e.ns).List(e.ctx, metav1.ListOptions{})
	must(t, err)
	byName := map[string]int{}
	rvs := map[string]string{}
	for _, cm := range cms.Items {
		byName[cm.Name]++
		rvs[cm.Name] = cm.ResourceVersion
		if cm.Name == bystander.Name {
			if cm.ResourceVersion != bystander.ResourceVersion || len(cm.Annotations) != 0 {
				t.Errorf("the bystander ConfigMap was changed: %+v", cm.ObjectMeta)
			}
			continue
		}
		var i int
		if _, err := fmt.Sscanf(cm.Name, "cm-%03d", &i); err != nil {
			t.Errorf("unexpected ConfigMap %s", cm.Name)
			continue
		}
		if cm.Data["index"] != fmt.Sprint(i) || cm.Data["payload"] != strings.Repeat(fmt.Sprintf("%03d", i), 100) || len(cm.Data) != 2 {
			t.Errorf("ConfigMap %s has data %v, not Git's", cm.Name, cm.Data)
		}
		if id := cm.Annotations[reconcile.TrackingAnnotation]; !strings.HasPrefix(id, syncNS+"/kill:") {
			t.Errorf("ConfigMap %s tracking id %q", cm.Name, id)
		}
	}
	for i := range killConfigMaps {
		want := 1
		if slices.Contains(dropped, i) {
			want = 0
		}
		if byName[cmName(i)] != want {
			t.Errorf("ConfigMap %s exists %d times, want %d", cmName(i), byName[cmName(i)], want)
		}
	}
	if byName[bystander.Name] != 1 {
		t.Errorf("the bystander ConfigMap is gone")
	}
	if want := killConfigMaps - len(dropped) + 1; len(cms.Items) != want {
		t.Errorf("%d ConfigMaps, want %d", len(cms.Items), want)
	}
	return rvs
}

// checkKillInventory checks the kill case's GitSync after a complete run
// at revision: Ready True, the pruned count, and an inventory listing the
// Namespace and each of Git's ConfigMaps once.
func (e *env) checkKillInventory(syncNS, revision string, dropped []int, pruned int) {
	e.t.Helper()
	obj, st := e.gitSyncObject(syncNS, "kill")
	checkReady(e.t, obj, st, metav1.ConditionTrue, gitsync.ReasonSynced, "Applied revision "+revision+":")
	if st.LastAppliedRevision != revision || st.Counts.Pruned != pruned || st.Counts.Failed != 0 {
		e.t.Errorf("GitSync status: applied revision %q (want %q), counts %+v (want %d pruned)", st.LastAppliedRevision, revision, st.Counts, pruned)
	}
	want := []string{"_" + e.ns + "__Namespace@v1"}
	for i := range killConfigMaps {
		if !slices.Contains(dropped, i) {
			want = append(want, e.ns+"_"+cmName(i)+"__ConfigMap@v1")
		}
	}
	got := inventoryIDs(st)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Errorf("GitSync inventory: %d entries, want the Namespace and %d ConfigMaps once each (%d entries)", len(got), len(want)-1, len(want))
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
