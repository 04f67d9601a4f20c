package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
)

const syncApp = `apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  mode: blue
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`

// syncRepo is a Git repository in a temporary directory, built with
// go-git, holding files in one commit on main.
func syncRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	commitSync(t, repo, dir, files)
	return dir
}

func commitSync(t *testing.T, repo *git.Repository, dir string, files map[string]string) {
	t.Helper()
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "truce", Email: "truce@example.com", When: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	if _, err := wt.Commit("sync test", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
}

// newSyncCluster is an empty in-process cluster that outlives one command,
// so that passes can follow each other.
func newSyncCluster(t *testing.T) *memory.Cluster {
	t.Helper()
	quietKlog()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	state, err := admission.NewState()
	if err != nil {
		t.Fatal(err)
	}
	c, err := memory.New(ctx, state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// quietKlog drops the upstream plugins' klog output, as Execute does.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// runSyncOn runs truce sync against mem (nil: through Execute, with the
// in-process cluster built from the arguments) and returns stdout, stderr
// and the exit status.
func runSyncOn(t *testing.T, mem *memory.Cluster, args ...string) (string, string, int) {
	t.Helper()
	if mem == nil {
		return runTruce(t, append([]string{"sync"}, args...)...)
	}
	var out, errOut bytes.Buffer
	cmd := newSyncCommandWith(&syncOptions{mem: mem})
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	var ee exitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), exitOK
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.code
	}
	errOut.WriteString("error: " + err.Error() + "\n")
	return out.String(), errOut.String(), exitFailure
}

// actionsOf reads the objects' actions from the text output.
func actionsOf(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "      ") {
			got[f[1]] = f[0]
		}
	}
	return got
}

func TestSyncOnce(t *testing.T) {
	repo := syncRepo(t, map[string]string{"apps/shop/app.yaml": syncApp, "README.md": "not a manifest\n"})
	created := map[string]string{"Namespace/shop": "Created", "ConfigMap/shop/settings": "Created", "Deployment.apps/shop/web": "Created"}
	unchanged := map[string]string{"Namespace/shop": "Unchanged", "ConfigMap/shop/settings": "Unchanged", "Deployment.apps/shop/web": "Unchanged"}
	mem := newSyncCluster(t)
	for _, tt := range []struct {
		name    string
		mem     *memory.Cluster
		args    []string
		code    int
		actions map[string]string
		out     []string
	}{
		{"a rehearsal creates everything", nil, []string{repo, "--once"}, exitOK, created,
			[]string{"into the in-process cluster (a rehearsal)", "3 created, 0 configured", ": synced"}},
		{"a dry run of a new sync is drift", nil, []string{repo, "--once", "--dry-run"}, exitFound, created,
			[]string{"dry run: nothing written", "0 writes", "drift: a pass would write"}},
		{"the sub-path in SOURCE", nil, []string{repo + "//apps/shop?ref=main", "--once"}, exitOK, created, []string{"at main@sha1:"}},
		{"the sub-path and ref as flags", nil, []string{repo, "--path", "apps/shop", "--ref", "main", "--once"}, exitOK, created, nil},
		// These share one cluster and run in order.
		{"the first pass creates", mem, []string{repo, "--once"}, exitOK, created, nil},
		{"the second pass changes nothing", mem, []string{repo, "--once"}, exitOK, unchanged, []string{"0 writes", ": synced"}},
		{"a dry run without drift", mem, []string{repo, "--once", "--dry-run"}, exitOK, unchanged, []string{": synced"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runSyncOn(t, tt.mem, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			got := actionsOf(out)
			for ref, want := range tt.actions {
				if got[ref] != want {
					t.Errorf("%s: %q, want %q\n%s", ref, got[ref], want, out)
				}
			}
			for _, s := range tt.out {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

// A field another writer changed is drift in a dry run (exit 1) and is
// written back by a pass (exit 0); with the loop breaker at 1 the first
// change back makes it contested (exit 1), naming the writer and the fix.
func TestSyncDriftAndContest(t *testing.T) {
	repo := syncRepo(t, map[string]string{"app.yaml": syncApp})
	mem := newSyncCluster(t)
	if _, errOut, code := runSyncOn(t, mem, repo, "--once"); code != exitOK {
		t.Fatalf("first pass: exit %d: %s", code, errOut)
	}
	web := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web"}
	scale := func(n int64) {
		t.Helper()
		obj, err := mem.Get(context.Background(), web)
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(obj.Object, n, "spec", "replicas"); err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Update(context.Background(), obj, cluster.WriteOptions{FieldManager: "hpa"}); err != nil {
			t.Fatal(err)
		}
	}
	scale(5)
	out, errOut, code := runSyncOn(t, mem, repo, "--once", "--dry-run")
	if code != exitFound || actionsOf(out)["Deployment.apps/shop/web"] != "Configured" || !strings.Contains(out, "drifted:   /spec/replicas") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runSyncOn(t, mem, repo, "--once", "-o", "json")
	var rep struct {
		Synced, Drifted bool
		Writes          int
		Objects         []struct {
			Ref     struct{ Kind string }
			Action  string
			Drifted []string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if code != exitOK || !rep.Synced || !rep.Drifted || rep.Writes != 1 {
		t.Fatalf("self-heal: exit %d, %+v\n%s", code, rep, errOut)
	}
	scale(6)
	out, errOut, code = runSyncOn(t, mem, repo, "--once", "--loop-threshold", "1")
	if code != exitFound {
		t.Fatalf("contested: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"contested: /spec/replicas: field manager hpa (Update) changed it back 1 times", "fix (", ": contested"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A field people edit (kubectl, or a tool --human-field-manager names) is
// written back and never contested, even with the loop breaker at 1;
// another field manager's change is contested.
func TestSyncPeopleAreReverted(t *testing.T) {
	repo := syncRepo(t, map[string]string{"app.yaml": syncApp})
	mem := newSyncCluster(t)
	if _, errOut, code := runSyncOn(t, mem, repo, "--once"); code != exitOK {
		t.Fatalf("first pass: exit %d: %s", code, errOut)
	}
	web := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web"}
	for _, tt := range []struct {
		name, manager string
		args          []string
		code          int
		want          string
	}{
		{"a dry run", "kubectl-edit", []string{"--dry-run"}, exitFound,
			"edited:    /spec/replicas outside Git by field manager kubectl-edit (Update): a pass reverts it to Git's value"},
		{"kubectl", "kubectl-edit", nil, exitOK, "edited:    /spec/replicas outside Git by field manager kubectl-edit (Update): reverted to Git's value"},
		{"a tool the flag names", "k9s", []string{"--human-field-manager", "k9s"}, exitOK,
			"edited:    /spec/replicas outside Git by field manager k9s (Update): reverted"},
		{"the same tool unnamed", "k9s", nil, exitFound, "contested: /spec/replicas: field manager k9s (Update) changed it back 1 times"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := mem.Get(context.Background(), web)
			if err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedField(obj.Object, int64(9), "spec", "replicas"); err != nil {
				t.Fatal(err)
			}
			if _, err := mem.Update(context.Background(), obj, cluster.WriteOptions{FieldManager: tt.manager}); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runSyncOn(t, mem, append([]string{repo, "--once", "--loop-threshold", "1"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tt.code, tt.want, out, errOut)
			}
		})
	}
}

func TestSyncIgnoreRules(t *testing.T) {
	repo := syncRepo(t, map[string]string{"app.yaml": syncApp})
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flux := write("ks.yaml", `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shop
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps/shop
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
  ignore:
  - paths: ["/spec/replicas"]
    target: {kind: Deployment, name: web}
`)
	argo := write("app.yaml", `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop
  namespace: argocd
spec:
  project: default
  source: {repoURL: https://example.com/fleet.git, path: apps/shop}
  destination: {server: https://kubernetes.default.svc, namespace: shop}
  ignoreDifferences:
  - group: apps
    kind: Deployment
    jsonPointers: ["/spec/replicas"]
`)
	// Argo CD's resource-level rule: truce sync honours it as truce check
	// and diff do (gitops.Settings.ComparisonFor).
	annotated := write("web.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations:
    argocd.argoproj.io/ignore-differences: /spec/replicas
`)
	for _, tt := range []struct{ name, file string }{{"Flux Kustomization", flux}, {"Argo CD Application", argo}, {"Argo CD resource annotation", annotated}} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newSyncCluster(t)
			if _, errOut, code := runSyncOn(t, mem, repo, "--once", "--ignore", tt.file); code != exitOK {
				t.Fatalf("first pass: exit %d: %s", code, errOut)
			}
			obj, err := mem.Get(context.Background(), cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web"})
			if err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedField(obj.Object, int64(7), "spec", "replicas")
			if _, err := mem.Update(context.Background(), obj, cluster.WriteOptions{FieldManager: "hpa"}); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runSyncOn(t, mem, repo, "--once", "--dry-run", "--ignore", tt.file)
			if code != exitOK || actionsOf(out)["Deployment.apps/shop/web"] != "Unchanged" ||
				!strings.Contains(out, "ignored:   /spec/replicas (adopt) by "+tt.file) {
				t.Errorf("exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

func TestSyncBadInput(t *testing.T) {
	repo := syncRepo(t, map[string]string{"app.yaml": syncApp})
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noRules := write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	badRule := write("bad-ks.yaml", `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop}
spec:
  ignore:
  - paths: ["spec/replicas"]
`)
	broken := write("broken.yaml", "apiVersion: v1\nkind: [\n")
	notGit := t.TempDir()
	secret := t.TempDir()
	for name, content := range map[string]string{"username": "git", "password": "s3cret"} {
		if err := os.WriteFile(filepath.Join(secret, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown drift mode", []string{repo, "--once", "--drift", "client"}, `--drift "client": want server or offline`},
		{"unknown status store", []string{repo, "--once", "--status", "configmap"}, `--status "configmap": want gitsync or none`},
		{"unknown output", []string{repo, "--once", "-o", "yaml"}, `unknown output format "yaml"`},
		{"prune without a status", []string{repo, "--once", "--prune", "--status", "none"}, "--prune needs --status gitsync"},
		{"once and interval", []string{repo, "--once", "--interval", "1m"}, "--once runs one pass; --interval is for the controller"},
		{"zero interval", []string{repo, "--interval", "0s"}, "--interval must be positive"},
		{"leader election in process", []string{repo, "--leader-elect"}, "--leader-elect needs a real cluster"},
		{"leader election for one pass", []string{repo, "--once", "--leader-elect", "--kubeconfig", "x"}, "--leader-elect is for the controller"},
		{"memory and a kubeconfig", []string{repo, "--once", "--memory", "--kubeconfig", "x"}, "--memory rehearses against the in-process cluster"},
		{"admission files without offline drift", []string{repo, "--once", "--admission", noRules}, "--admission feeds the offline prediction"},
		{"an invalid name", []string{repo, "--once", "--name", "Shop_1"}, `--name "Shop_1"`},
		{"a missing source", []string{filepath.Join(dir, "nope"), "--once"}, "SOURCE " + filepath.Join(dir, "nope") + ": "},
		{"a directory that is no repository", []string{notGit, "--once"}, notGit},
		{"a malformed URL", []string{"https://", "--once"}, `SOURCE "https://" is not a Git URL`},
		{"a ref twice", []string{repo + "?ref=main", "--ref", "dev", "--once"}, `SOURCE names ref "main" and --ref "dev": give one`},
		{"a missing ref", []string{repo, "--ref", "nope", "--once"}, "nope"},
		{"a missing ignore file", []string{repo, "--once", "--ignore", filepath.Join(dir, "missing.yaml")}, "--ignore " + filepath.Join(dir, "missing.yaml")},
		{"an ignore file without rules", []string{repo, "--once", "--ignore", noRules}, "--ignore " + noRules + ": no Flux Kustomization"},
		{"an invalid ignore rule", []string{repo, "--once", "--ignore", badRule}, "--ignore " + badRule + ": " + badRule + ":1"},
		{"an unparsable ignore file", []string{repo, "--once", "--ignore", broken}, "--ignore " + broken + ": " + broken},
		{"an unparsable admission file", []string{repo, "--once", "--drift", "offline", "--admission", broken}, "--admission: " + broken},
		{"a bad backoff", []string{repo, "--once", "--backoff-factor", "0.5"}, "backoff: need initial > 0, factor >= 1"},
		{"a missing secret directory", []string{"https://github.com/org/fleet", "--once", "--git-secret", filepath.Join(dir, "nope")}, "--git-secret " + filepath.Join(dir, "nope") + ": reading the Git credentials: stat " + filepath.Join(dir, "nope")},
		{"a secret for a local repository", []string{repo, "--once", "--git-secret", secret}, "--git-secret " + secret + ": credentials are for https://, http:// and SSH URLs; " + repo + " is read without them"},
		{"credentials over plain http", []string{"http://git.internal/org/fleet", "--once", "--git-secret", secret}, "over plain http://: they would cross the network in clear text; use https:// (--git-insecure-http allows it)"},
		{"insecure http without a secret", []string{"http://git.internal/org/fleet", "--once", "--git-insecure-http"}, "--git-insecure-http lets the credentials of --git-secret go over plain http://: it needs --git-secret"},
		{"SSH without a key", []string{"git@github.com:org/fleet", "--once", "--git-secret", secret}, "--git-secret " + secret + ": " + secret + "/identity is missing or empty"},
		{"no source", []string{"--once"}, "accepts 1 arg(s), received 0"},
		{"an unknown flag", []string{repo, "--once", "--frobnicate"}, "unknown flag: --frobnicate"},
	} {
		// Not in parallel: Execute sets klog's global flags.
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runTruce(t, append([]string{"sync"}, tt.args...)...)
			if code != exitFailure {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailure, out, errOut)
			}
			if !strings.Contains(errOut, tt.want) || !strings.HasPrefix(errOut, "error: ") {
				t.Errorf("stderr %q lacks %q", errOut, tt.want)
			}
		})
	}
}

// A pass that cannot run prints the error, also as JSON, and exits 2.
func TestSyncPassErrorJSON(t *testing.T) {
	repo := syncRepo(t, map[string]string{"app.yaml": syncApp})
	out, errOut, code := runTruce(t, "sync", repo, "--once", "--path", "missing", "-o", "json")
	if code != exitFailure {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var rep struct{ Source, Error string }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Source != repo+"//missing" || !strings.Contains(rep.Error, `path "missing" does not exist`) || !strings.Contains(errOut, `path "missing" does not exist`) {
		t.Errorf("report %+v, stderr %s", rep, errOut)
	}
}

// gitHTTPBackend serves the repository at dir with git http-backend on a
// loopback address, to requests with the basic credentials user:password;
// it returns the repository's URL and how many requests carried them.
func gitHTTPBackend(t *testing.T, dir, user, password string) (string, *atomic.Int32) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git http-backend")
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{
		"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
	}}
	authorized := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(dir), authorized
}

// A private repository over HTTP, with the credentials of a Flux Git
// secret's files; nothing is cloned again while the branch stays put.
func TestSyncGitSecret(t *testing.T) {
	repo := syncRepo(t, map[string]string{"apps/shop/app.yaml": syncApp})
	u, authorized := gitHTTPBackend(t, repo, "git", "s3cret-token")
	secret := t.TempDir()
	for name, content := range map[string]string{"username": "git\n", "password": "s3cret-token\n"} {
		if err := os.WriteFile(filepath.Join(secret, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	source := u + "//apps/shop?ref=main"

	out, errOut, code := runSyncOn(t, nil, source, "--once")
	if code != exitFailure || !strings.Contains(errOut, "authentication required (no credentials were given)") {
		t.Errorf("no credentials: exit %d\n%s%s", code, out, errOut)
	}

	mem := newSyncCluster(t)
	out, errOut, code = runSyncOn(t, mem, source, "--once", "--git-secret", secret, "--git-insecure-http")
	if code != exitOK || actionsOf(out)["Deployment.apps/shop/web"] != "Created" || !strings.Contains(out, "at main@sha1:") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if authorized.Load() == 0 {
		t.Error("no request carried the credentials")
	}
	if strings.Contains(out+errOut, "s3cret-token") {
		t.Error("the password is in the output")
	}
}
