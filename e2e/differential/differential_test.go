//go:build e2e

package differential

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/e2e/webhookserver"
)

// Flags are also settable through the environment, which is what to use
// with `go test ./e2e/...`: -args would reach every package's test binary,
// and the others do not define these flags.
var (
	flagServerOnly = flag.Bool("server-only", os.Getenv("TRUCE_E2E_SERVER_ONLY") == "1",
		"only run the cases against the real server and print its results (env TRUCE_E2E_SERVER_ONLY=1)")
	flagTruceBin = flag.String("truce-bin", os.Getenv("TRUCE_E2E_BIN"),
		"truce binary to test; built from ./cmd/truce if empty (env TRUCE_E2E_BIN)")
	flagCases = flag.String("cases", envOr("TRUCE_E2E_CASES", filepath.Join("..", "testdata", "cases")),
		"root of the case corpus (env TRUCE_E2E_CASES)")
	flagOut = flag.String("out", os.Getenv("TRUCE_E2E_OUT"),
		"if set, write each case's server.json (and truce.json) to OUT/<area>/<case>/ (env TRUCE_E2E_OUT)")
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// The test webhook server (see e2e/webhookserver) and the service the cases
// reach it by.
const (
	WebhookNamespace = "webhook-system"
	WebhookService   = "truce-webhook"
)

var webhooks *webhookserver.Server

// placeholders are what cases may use in cluster.yaml and write.yaml.
func placeholders() map[string]string {
	return map[string]string{
		"WEBHOOK_URL":       webhooks.URL,
		"CA_BUNDLE":         base64.StdEncoding.EncodeToString(webhooks.CABundle),
		"WEBHOOK_NAMESPACE": WebhookNamespace,
		"WEBHOOK_SERVICE":   WebhookService,
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	webhooks, err = webhookserver.Start([]string{
		WebhookService + "." + WebhookNamespace + ".svc",
		"*." + WebhookNamespace + ".svc",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start webhook server:", err)
		os.Exit(2)
	}
	if err := apiserver.WebhookServices.Set(WebhookNamespace, WebhookService, webhooks.URL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if err := webhooks.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping webhook server:", err)
	}
	// The servers outlive every test (they are shared), so they are
	// stopped here rather than in a t.Cleanup.
	if err := apiserver.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping kube-apiserver:", err)
	}
	os.Exit(code)
}

// outcome is one case's result for the summary.
type outcome struct {
	area, name string
	status     string // "pass", "fail", "skip"
	took       time.Duration
}

func TestDifferential(t *testing.T) {
	cases, err := LoadCases(*flagCases)
	if err != nil {
		// A broken case fails the run, but does not keep the others from
		// running.
		t.Errorf("loading the corpus: %v", err)
		if len(cases) == 0 {
			t.FailNow()
		}
	}
	ctx := context.Background()

	truceBin := truceBinary(t)

	var outcomes []outcome
	t.Cleanup(func() { summarize(t, outcomes) })
	for _, c := range cases {
		start := time.Now()
		ran := false // t.Run reports success for cases -run filters out
		ok := t.Run(c.ID(), func(t *testing.T) {
			ran = true
			if c.Spec.Skip != "" {
				t.Skip(c.Spec.Skip)
			}
			runCase(ctx, t, c, truceBin)
		})
		if !ran {
			continue
		}
		status := "pass"
		switch {
		case !ok:
			status = "fail"
		case c.Spec.Skip != "":
			status = "skip"
		}
		outcomes = append(outcomes, outcome{c.Area, c.Name, status, time.Since(start)})
	}
}

// serverFor returns the shared server for the case's admission plugin set,
// logging how long a start took the first time.
func serverFor(ctx context.Context, t *testing.T, c *Case) *apiserver.Server {
	t.Helper()
	key := strings.Join(c.DisabledPlugins(), ",")
	startMu.Lock()
	defer startMu.Unlock()
	start := time.Now()
	srv, err := apiserver.Shared(ctx, c.DisabledPlugins())
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	if !started[key] {
		started[key] = true
		t.Logf("kube-apiserver (--disable-admission-plugins=%s) after %s: %s; kubeconfig %s, audit log %s",
			key, time.Since(start).Round(time.Millisecond), srv.StartupReport(), srv.Kubeconfig(), srv.AuditLogPath())
	}
	return srv
}

// auditLevel is the level apiserver.AuditPolicy records the writes at.
const auditLevel = "Metadata"

// dirty names the case whose cleanup failed, if any.
var dirty string

// useCleanServer fails t when an earlier case left the shared server dirty,
// and cleans the server when t ends; a failed cleanup marks it dirty, so
// that later cases do not run on it.
func useCleanServer(ctx context.Context, t *testing.T, srv *apiserver.Server) {
	t.Helper()
	if dirty != "" {
		t.Fatalf("not run: the server was left dirty by %s", dirty)
	}
	t.Cleanup(func() {
		if err := srv.Cleanup(ctx); err != nil {
			dirty = t.Name()
			t.Errorf("cleanup failed; later cases will not run: %v", err)
		}
	})
}

var (
	startMu sync.Mutex
	started = map[string]bool{}
)

func runCase(ctx context.Context, t *testing.T, c *Case, truceBin string) {
	if c.Spec.Description != "" {
		t.Log(c.Spec.Description)
	}
	srv := serverFor(ctx, t, c)
	if has, err := c.HasPlaceholders(); err != nil {
		t.Fatal(err)
	} else if has {
		if c, err = c.Expand(placeholders(), filepath.Join(t.TempDir(), c.Area, c.Name)); err != nil {
			t.Fatal(err)
		}
	}

	if dirty != "" {
		t.Fatalf("not run: the server was left dirty by %s", dirty)
	}
	var cluster []*unstructured.Unstructured
	for _, d := range c.Cluster {
		cluster = append(cluster, d.Object)
	}
	phase := time.Now()
	// Clean up even when the case fails half-way, so the next case starts
	// from a pristine server; a failed cleanup would poison every later
	// case, so they are not run.
	defer func() {
		cleanStart := time.Now()
		if err := srv.Cleanup(ctx); err != nil {
			dirty = c.ID()
			t.Errorf("cleanup failed; later cases will not run: %v", err)
			return
		}
		t.Logf("timing: cleanup+sync %s", time.Since(cleanStart).Round(time.Millisecond))
	}()
	if err := srv.Apply(ctx, cluster...); err != nil {
		t.Fatalf("apply cluster.yaml: %v", err)
	}
	if err := srv.WaitForAdmissionSync(ctx); err != nil {
		t.Fatal(err)
	}
	tApply := time.Since(phase)

	phase = time.Now()
	res, ann := serverDryRun(ctx, t, srv, c)
	tDryRun := time.Since(phase)
	server := ServerResult(c, res, ann)
	serverJSON := mustJSON(t, Output{Results: []Result{server}})
	writeOut(t, c, "server.json", serverJSON)
	t.Logf("timing: apply+sync %s, dry-run %s (%d attempt(s))", tApply.Round(time.Millisecond), tDryRun.Round(time.Millisecond), res.Attempts)

	for _, d := range CheckExpect(c.Spec.Expect, server) {
		t.Errorf("case expectation (%s): %s", filepath.Join(c.Dir, SpecFile), d)
	}

	if truceBin == "" {
		t.Logf("server result:\n%s", serverJSON)
		return
	}

	phase = time.Now()
	got, raw, stderr, err := runTruce(ctx, truceBin, c)
	writeOut(t, c, "truce.json", raw)
	if len(stderr) > 0 {
		writeOut(t, c, "truce.stderr", stderr)
	}
	if err != nil {
		t.Logf("server result:\n%s", serverJSON)
		t.Fatal(err)
	}
	t.Logf("timing: truce %s", time.Since(phase).Round(time.Millisecond))
	diffs := Compare(server, got, CompareOptions{
		AuditAnnotations:      c.Spec.CompareAuditAnnotations,
		AuditLevel:            auditLevel,
		UnpredictableWebhooks: c.Spec.UnpredictableWebhooks,
	})
	for _, d := range diffs {
		t.Errorf("truce differs from kube-apiserver: %s", d)
	}
	if len(diffs) > 0 {
		t.Logf("server result:\n%s\ntruce result:\n%s", serverJSON, raw)
	}
}

// serverDryRun sends the case's write to the server as a dry run (as the
// case's user, once RBAC lets it or after a short wait) and returns the
// answer with its audit annotations.
func serverDryRun(ctx context.Context, t *testing.T, srv *apiserver.Server, c *Case) (*apiserver.DryRunResult, map[string]string) {
	t.Helper()
	op, err := c.WriteOperation(func(gvk schema.GroupVersionKind) (bool, error) {
		return srv.IsNamespaced(ctx, gvk)
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.User != "" {
		// RBAC objects of the case may not be in effect yet (see
		// WaitForAuthorization); a denial may also be what the case is
		// about, so this only waits a little and goes on either way.
		verb := "create"
		if op == apiserver.Update {
			verb = "update"
		}
		ok, err := srv.WaitForAuthorization(ctx, c.Spec.User, c.Spec.Groups, verb, c.Write.Object, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Logf("note: RBAC does not allow %s to %s the write; the server will answer Forbidden", c.Spec.User, verb)
		}
	}
	if c.Spec.Verb != "replace" {
		res, err := serverVerb(ctx, srv, c)
		if err != nil {
			t.Fatalf("server %s: %v", c.Spec.Verb, err)
		}
		ann, err := srv.AuditAnnotations(ctx, res.AuditID)
		if err != nil {
			t.Fatal(err)
		}
		return res, ann
	}
	// The write is what kubectl create or kubectl replace sends, with
	// their field managers: truce admit's --replace.
	var res *apiserver.DryRunResult
	if op == apiserver.Update {
		res, err = srv.DryRunUpdate(ctx, c.Write.Object, c.Spec.User, c.Spec.Groups,
			apiserver.WithFieldValidation(c.Spec.FieldValidation), apiserver.WithFieldManager(apiserver.ReplaceFieldManager))
	} else {
		res, err = srv.DryRunCreate(ctx, c.Write.Object, c.Spec.User, c.Spec.Groups,
			apiserver.WithFieldValidation(c.Spec.FieldValidation), apiserver.WithFieldManager(apiserver.CreateFieldManager))
	}
	if err != nil {
		t.Fatalf("server dry-run: %v", err)
	}
	ann, err := srv.AuditAnnotations(ctx, res.AuditID)
	if err != nil {
		t.Fatal(err)
	}
	return res, ann
}

// runTruce runs `truce admit` on the case and checks the exit code against
// the JSON it printed.
func runTruce(ctx context.Context, bin string, c *Case) (res Result, stdout, stderr []byte, err error) {
	// Run in the case directory with relative file names, so truce's
	// "source" reads "write.yaml:N" like the server side's.
	args := []string{"admit"}
	if c.HasCluster() {
		args = append(args, "-c", ClusterFile)
	}
	args = append(args, "-o", "json", "--show-managed-fields",
		"--disable-admission-plugins="+strings.Join(c.DisabledPlugins(), ","),
		"--field-validation="+c.Spec.FieldValidation,
		// StartTestServer's --service-cluster-ip-range.
		"--service-cluster-ip-range="+apiserver.ServiceClusterIPRange)
	// The server calls every webhook it can reach: truce is given the same
	// reach (URL webhooks, and the registered services).
	args = append(args, "--call-webhooks")
	args = append(args, apiserver.WebhookServices.Flags()...)
	if c.Spec.User != "" {
		args = append(args, "--user", c.Spec.User)
	}
	for _, g := range c.Spec.Groups {
		args = append(args, "--group", g)
	}
	// Last: the command of --exec follows "--".
	args = append(args, verbArgs(c)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.Dir
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	runErr := cmd.Run()
	stdout, stderr = outBuf.Bytes(), errBuf.Bytes()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		code = exitErr.ExitCode()
	} else if runErr != nil {
		return res, stdout, stderr, fmt.Errorf("run %s %s: %w", bin, strings.Join(args, " "), runErr)
	}
	if code != 0 && code != 1 {
		return res, stdout, stderr, fmt.Errorf("%s %s: exit code %d (error)\nstderr:\n%s\nstdout:\n%s", bin, strings.Join(args, " "), code, stderr, stdout)
	}
	out, err := ParseOutput(stdout)
	if err != nil {
		return res, stdout, stderr, fmt.Errorf("%w\nstderr:\n%s\nstdout:\n%s", err, stderr, stdout)
	}
	if len(out.Results) != 1 {
		return res, stdout, stderr, fmt.Errorf("truce printed %d results, want 1", len(out.Results))
	}
	res = out.Results[0]
	if (code == 0) != res.Allowed {
		return res, stdout, stderr, fmt.Errorf("truce exit code %d contradicts allowed=%v", code, res.Allowed)
	}
	return res, stdout, stderr, nil
}

var (
	truceOnce    sync.Once
	truceBinPath string
	truceBinErr  error
)

// truceBinary returns the absolute path of the truce binary under test
// ("" in server-only mode), building ./cmd/truce once per test binary
// when -truce-bin is not given.
func truceBinary(t *testing.T) string {
	t.Helper()
	if *flagServerOnly {
		return ""
	}
	truceOnce.Do(func() {
		bin := *flagTruceBin
		if bin == "" {
			bin, truceBinErr = buildTruce()
			if truceBinErr != nil {
				return
			}
		}
		// truce runs in each case's directory.
		truceBinPath, truceBinErr = filepath.Abs(bin)
	})
	if truceBinErr != nil {
		t.Fatal(truceBinErr)
	}
	return truceBinPath
}

// buildTruce builds ./cmd/truce into a temporary directory (left for the
// OS to clean: the binary is shared by the tests of this test binary).
func buildTruce() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "truce-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "truce")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/truce")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/truce: %v\n%s\n(to check the cases against the server alone, set TRUCE_E2E_SERVER_ONLY=1)", err, out)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeOut(t *testing.T, c *Case, name string, data []byte) {
	t.Helper()
	if *flagOut == "" || data == nil {
		return
	}
	dir := filepath.Join(*flagOut, c.Area, c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// summarize logs one line per area and a total.
func summarize(t *testing.T, outcomes []outcome) {
	type counts struct {
		pass, fail, skip int
		took             time.Duration
	}
	byArea := map[string]*counts{}
	var areas []string
	total := &counts{}
	for _, o := range outcomes {
		c, ok := byArea[o.area]
		if !ok {
			c = &counts{}
			byArea[o.area] = c
			areas = append(areas, o.area)
		}
		for _, x := range []*counts{c, total} {
			switch o.status {
			case "pass":
				x.pass++
			case "fail":
				x.fail++
			case "skip":
				x.skip++
			}
			x.took += o.took
		}
	}
	sort.Strings(areas)
	mode := "differential"
	if *flagServerOnly {
		mode = "server-only"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "summary (%s):\n", mode)
	for _, a := range areas {
		c := byArea[a]
		fmt.Fprintf(&b, "  %-12s %2d pass  %2d fail  %2d skip  %s\n", a, c.pass, c.fail, c.skip, c.took.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  %-12s %2d pass  %2d fail  %2d skip  %s", "total", total.pass, total.fail, total.skip, total.took.Round(time.Millisecond))
	t.Log(b.String())
}
