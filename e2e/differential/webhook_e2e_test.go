//go:build e2e

package differential

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/internal/certs"
	"github.com/truce-dev/truce/webhook"
	"github.com/truce-dev/truce/webhook/configuration"
)

// servedWebhook is a `truce webhook serve` process on loopback.
type servedWebhook struct {
	URL      string
	CABundle []byte
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan error
	stopped  bool
}

// syncBuffer is the process's stderr, written by the scanner goroutine and
// read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServedWebhook runs `truce webhook serve --policies policies` with a
// fresh loopback CA and returns once it serves.
func startServedWebhook(ctx context.Context, t *testing.T, bin string, policies ...string) *servedWebhook {
	t.Helper()
	w, err := tryServedWebhook(ctx, t, bin, policies...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// tryServedWebhook is startServedWebhook returning the refusal of a
// server that exits before serving.
func tryServedWebhook(ctx context.Context, t *testing.T, bin string, policies ...string) (*servedWebhook, error) {
	t.Helper()
	dir := t.TempDir()
	ca, pair, err := certs.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, data := range map[string][]byte{certFile: pair.CertPEM, keyFile: pair.KeyPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"webhook", "serve", "--tls-cert", certFile, "--tls-key", keyFile,
		"--addr", "127.0.0.1:0", "--probe-addr", "", "--reload-interval", "0", "--shutdown-delay", "0", "--log-format", "json"}
	for _, p := range policies {
		args = append(args, "--policies", p)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	pr, pw := io.Pipe()
	w := &servedWebhook{CABundle: ca.PEM, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exited <- cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = w.stderr.Write(append(line, '\n'))
			var entry struct{ Msg, Addr string }
			if !sent && json.Unmarshal(line, &entry) == nil && entry.Msg == "serving" {
				addr <- entry.Addr
				sent = true
			}
		}
		close(addr)
	}()
	t.Cleanup(w.stop)
	select {
	case a, ok := <-addr:
		if !ok {
			return nil, fmt.Errorf("truce webhook serve exited before serving:\n%s", w.stderr)
		}
		w.URL = "https://" + a
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("truce webhook serve did not start within 60s:\n%s", w.stderr)
	}
	return w, nil
}

// notIdempotent are corpus cases whose mutations change their own result:
// `truce webhook serve` must refuse to serve them.
var notIdempotent = map[string]bool{
	"map/jp-append-container-dash":          true,
	"map/reinvocation-single-never-counter": true,
}

// stop sends SIGTERM and waits for a graceful exit (once; the test's
// goroutine only).
func (w *servedWebhook) stop() {
	if w.stopped {
		return
	}
	w.stopped = true
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// policyKinds are what `truce webhook serve` takes over from the server.
var policyKinds = map[string]bool{
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// servable says why a corpus case cannot be run with its policies served
// as webhooks ("" when it can).
func servable(c *Case) string {
	if c.Spec.Skip != "" {
		return c.Spec.Skip
	}
	policies := 0
	for _, d := range c.Cluster {
		switch d.Object.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			return "the case has webhooks of its own"
		case "MutatingAdmissionPolicy", "ValidatingAdmissionPolicy":
			policies++
		}
	}
	if policies == 0 {
		return "no policies"
	}
	for _, p := range c.DisabledPlugins() {
		if p == "MutatingAdmissionPolicy" || p == "ValidatingAdmissionPolicy" {
			return "the case disables a policy plugin"
		}
	}
	if ns := c.Write.Object.GetNamespace(); ns == "kube-system" {
		// By design: the generated configurations never send kube-system.
		return "writes to kube-system, which the webhook configurations exclude"
	}
	return ""
}

// TestServedPolicies: for every corpus case with policies, the real
// kube-apiserver calling `truce webhook serve` (the case's policies served
// as webhooks, configured by `truce webhook config`'s generator) stores the
// same object or answers the same denial as `truce admit` with the
// policies in-tree.
func TestServedPolicies(t *testing.T) {
	if *flagServerOnly {
		t.Skip("needs truce")
	}
	cases, err := LoadCases(*flagCases)
	if err != nil {
		t.Fatalf("loading the corpus: %v", err)
	}
	ctx := context.Background()
	bin := truceBinary(t)
	var outcomes []outcome
	t.Cleanup(func() { summarize(t, outcomes) })
	defer func() {
		// A corpus change that made nothing servable must not pass.
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" && len(outcomes) < 100 {
			t.Errorf("only %d corpus cases were served; want at least 100", len(outcomes))
		}
	}()
	for _, c := range cases {
		reason := servable(c)
		if reason == "no policies" || reason == "the case has webhooks of its own" {
			continue
		}
		start := time.Now()
		ran := false
		ok := t.Run(c.ID(), func(t *testing.T) {
			ran = true
			if reason != "" {
				t.Skip(reason)
			}
			runServedCase(ctx, t, c, bin)
		})
		if !ran {
			continue
		}
		status := "pass"
		switch {
		case !ok:
			status = "fail"
		case reason != "":
			status = "skip"
		}
		outcomes = append(outcomes, outcome{c.Area, c.Name, status, time.Since(start)})
	}
}

func runServedCase(ctx context.Context, t *testing.T, c *Case, bin string) {
	srv := serverFor(ctx, t, c)
	if dirty != "" {
		t.Fatalf("not run: the server was left dirty by %s", dirty)
	}
	hook, err := tryServedWebhook(ctx, t, bin, filepath.Join(c.Dir, ClusterFile))
	if notIdempotent[c.ID()] {
		if err == nil || !strings.Contains(err.Error(), "the mutations are not idempotent") {
			t.Fatalf("truce webhook serve must refuse mutations that are not idempotent; got %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}

	var policies, cluster []*unstructured.Unstructured
	for _, d := range c.Cluster {
		if policyKinds[d.Object.GetKind()] {
			policies = append(policies, d.Object)
			continue
		}
		cluster = append(cluster, d.Object)
	}
	configs, err := configuration.Generate(policies, configuration.Options{URL: hook.URL, CABundle: hook.CABundle})
	if err != nil {
		t.Fatalf("generating webhook configurations: %v", err)
	}
	for _, w := range configs.Warnings {
		t.Logf("webhook config: %s", w)
	}
	objs, err := configs.Objects()
	if err != nil {
		t.Fatal(err)
	}
	cluster = append(cluster, objs...)
	defer func() {
		if err := srv.Cleanup(ctx); err != nil {
			dirty = c.ID()
			t.Errorf("cleanup failed; later cases will not run: %v", err)
		}
	}()
	if err := srv.Apply(ctx, cluster...); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := srv.WaitForAdmissionSync(ctx); err != nil {
		t.Fatal(err)
	}
	res, ann := serverDryRun(ctx, t, srv, c)
	server := servedResult(ServerResult(c, res, ann), configs)

	got, raw, _, err := runTruce(ctx, bin, c)
	if err != nil {
		t.Fatal(err)
	}
	got = inTreeAsServed(got, configs)
	diffs := Compare(server, got, CompareOptions{AuditAnnotations: c.Spec.CompareAuditAnnotations, AuditLevel: auditLevel})
	for _, d := range diffs {
		t.Errorf("kube-apiserver calling truce webhook serve differs from truce admit: %s", d)
	}
	if len(diffs) > 0 {
		t.Logf("server result:\n%s\ntruce admit result:\n%s\nwebhook log:\n%s", mustJSON(t, server), raw, hook.stderr)
	}
}

// servedResult takes out of the server's answer what only says that a
// webhook answered: the "admission webhook %q denied the request: "
// prefix of a denial, and the server's own annotations of a webhook call.
func servedResult(r Result, configs *configuration.Configurations) Result {
	for _, name := range webhookNames(configs) {
		if rest, ok := strings.CutPrefix(r.Message, fmt.Sprintf("admission webhook %q denied the request: ", name)); ok {
			r.Message = rest
		}
	}
	r.AuditAnnotations = dropPrefixes(r.AuditAnnotations, []string{"mutation.webhook.admission.k8s.io/", "patch.webhook.admission.k8s.io/"})
	return r
}

// inTreeAsServed renames `truce admit`'s policy audit annotations as the
// server records them when the validating webhook returns them.
func inTreeAsServed(r Result, configs *configuration.Configurations) Result {
	if len(r.AuditAnnotations) == 0 || configs.Validating == nil {
		return r
	}
	out := map[string]string{}
	for k, v := range r.AuditAnnotations {
		out[configs.Validating.Webhooks[0].Name+"/"+webhook.AuditAnnotationKey(k)] = v
	}
	r.AuditAnnotations = out
	return r
}

func webhookNames(configs *configuration.Configurations) []string {
	var out []string
	if configs.Mutating != nil {
		for _, w := range configs.Mutating.Webhooks {
			out = append(out, w.Name)
		}
	}
	if configs.Validating != nil {
		for _, w := range configs.Validating.Webhooks {
			out = append(out, w.Name)
		}
	}
	return out
}

// TestServedPoliciesWebhookDown: with `truce webhook serve` stopped, the
// validating webhook (failurePolicy Fail) rejects the writes it matches and
// the mutating one (Ignore) lets them through unmutated.
func TestServedPoliciesWebhookDown(t *testing.T) {
	if *flagServerOnly {
		t.Skip("needs truce")
	}
	ctx := context.Background()
	bin := truceBinary(t)
	srv, err := apiserver.Shared(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dirty != "" {
		t.Fatalf("not run: the server was left dirty by %s", dirty)
	}
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(policyFile, []byte(downPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := startServedWebhook(ctx, t, bin, policyFile)
	docs, err := ParseFile(policyFile, "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var policies []*unstructured.Unstructured
	for _, d := range docs {
		policies = append(policies, d.Object)
	}
	configs, err := configuration.Generate(policies, configuration.Options{URL: hook.URL, CABundle: hook.CABundle})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := configs.Objects()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Cleanup(ctx); err != nil {
			dirty = t.Name()
			t.Errorf("cleanup: %v", err)
		}
	}()
	if err := srv.Apply(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitForAdmissionSync(ctx); err != nil {
		t.Fatal(err)
	}
	configMap := func(name string) *unstructured.Unstructured {
		return mustUnstructured(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"k":"v"}}`, name))
	}
	secret := mustUnstructured(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default"},"stringData":{"k":"v"}}`)

	// Up: both webhooks answer.
	res, err := srv.DryRunCreate(ctx, configMap("up"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed() || res.Object.GetLabels()["served-by"] != "truce" {
		t.Fatalf("with the webhook up: allowed=%v labels=%v, want the served-by label", res.Allowed(), labelsOf(res))
	}
	if res, err = srv.DryRunCreate(ctx, configMap("forbidden"), "", nil); err != nil || res.Allowed() ||
		!strings.Contains(res.Status.Error(), "names ending in forbidden are not allowed") {
		t.Fatalf("with the webhook up, the VAP must deny: %v %v", err, res.Status)
	}

	hook.stop()
	// Down: Fail rejects what the validating webhook matches ...
	res, err = srv.DryRunCreate(ctx, configMap("down"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed() || !strings.Contains(res.Status.Error(), fmt.Sprintf("failed calling webhook %q", configs.Validating.Webhooks[0].Name)) {
		t.Fatalf("with the webhook down, a ConfigMap (validating, Fail) must be rejected; got allowed=%v %v", res.Allowed(), res.Status)
	}
	// ... and Ignore admits, unmutated, what only the mutating one matches.
	res, err = srv.DryRunCreate(ctx, secret, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed() || res.Object.GetLabels()["served-by"] != "" {
		t.Fatalf("with the webhook down, a Secret (mutating, Ignore) must be admitted unmutated; got allowed=%v %v labels=%v", res.Allowed(), res.Status, labelsOf(res))
	}
}

func labelsOf(r *apiserver.DryRunResult) map[string]string {
	if r.Object == nil {
		return nil
	}
	return r.Object.GetLabels()
}

func mustUnstructured(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return u
}

// downPolicies: a label on ConfigMaps and Secrets (mutating), a name rule
// on ConfigMaps (validating).
const downPolicies = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: served-by}
spec:
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps, secrets]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"served-by": "truce"}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: served-by}
spec: {policyName: served-by}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-forbidden-names}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  validations:
  - expression: "!object.metadata.name.endsWith('forbidden')"
    message: names ending in forbidden are not allowed
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-forbidden-names}
spec: {policyName: no-forbidden-names, validationActions: [Deny]}
`
