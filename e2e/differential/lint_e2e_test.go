//go:build e2e

package differential

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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/lint"
)

// The outage rule's scenario: a fail-closed webhook whose service lives in
// webhook-home (and is down: the harness resolves no endpoint for it), with
// a namespaceSelector that opts namespaces in by label, and webhook-home
// carries the label. webhook-tenant is an ordinary namespace it enforces.
const (
	lintHome       = "webhook-home"
	lintTenant     = "webhook-tenant"
	lintConfigName = "lint-outage.truce.dev"
	lintHookName   = "configmaps.lint-outage.truce.dev"
)

const lintNamespaces = `apiVersion: v1
kind: Namespace
metadata:
  name: webhook-home
  labels:
    lint-e2e.truce.dev/enforce: "true"
---
apiVersion: v1
kind: Namespace
metadata:
  name: webhook-tenant
  labels:
    lint-e2e.truce.dev/enforce: "true"
`

// lintWebhook is the configuration; with exclude, its namespaceSelector also
// leaves out kube-system and its own namespace, as the rule's fix says.
func lintWebhook(exclude bool) string {
	selector := `    namespaceSelector:
      matchLabels:
        lint-e2e.truce.dev/enforce: "true"
`
	if exclude {
		selector += `      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values: [kube-system, webhook-home]
`
	}
	// Scoped to ConfigMaps in labelled namespaces, so that the harness's
	// sentinel (a custom resource in its own namespace) never meets it.
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: ` + lintConfigName + `
webhooks:
  - name: ` + lintHookName + `
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 2
    clientConfig:
      service:
        namespace: ` + lintHome + `
        name: policy-down
        path: /validate
` + selector + `    rules:
      - operations: [CREATE, UPDATE]
        apiGroups: [""]
        apiVersions: [v1]
        resources: [configmaps]
`
}

// TestLintOutageRule confirms webhook-fail-closed-without-exclusion against
// the real kube-apiserver: where truce lint reports it, a write in the
// webhook's own namespace is rejected while the webhook is down; with the
// exclusion it suggests, lint is quiet and the same write is admitted (and
// the webhook still enforces elsewhere). The rule is checked on the files
// and on the live cluster (--kubeconfig).
func TestLintOutageRule(t *testing.T) {
	if *flagServerOnly {
		t.Skip("needs truce")
	}
	start := time.Now()
	ctx := context.Background()
	bin := truceBinary(t)
	srv, err := apiserver.Shared(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %s", srv.StartupReport())
	useCleanServer(ctx, t, srv)

	dir := t.TempDir()
	nsFile := writeLintFile(t, dir, "namespaces.yaml", lintNamespaces)
	configMap := func(ns string) *unstructured.Unstructured {
		return mustUnstructured(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe","namespace":%q},"data":{"k":"v"}}`, ns))
	}

	for _, exclude := range []bool{false, true} {
		name := map[bool]string{false: "without-exclusion", true: "with-exclusion"}[exclude]
		t.Run(name, func(t *testing.T) {
			phase := time.Now()
			hookFile := writeLintFile(t, dir, name+".yaml", lintWebhook(exclude))

			// What lint says about the files, before anything is applied.
			files := runLint(ctx, t, bin, nsFile, hookFile)
			outage := findingsFor(files, lint.RuleWebhookFailClosedWithoutExclusion, "ValidatingWebhookConfiguration "+lintConfigName)
			if exclude {
				if len(outage) != 0 {
					t.Fatalf("lint on the files reports the outage rule with the exclusion: %+v", outage)
				}
			} else {
				if len(outage) != 1 || !strings.Contains(outage[0].Message, "namespace "+lintHome) ||
					strings.Contains(outage[0].Message, "kube-system") || !strings.HasPrefix(outage[0].Source, hookFile+":") {
					t.Fatalf("lint on the files: want one %s finding naming %s (and not kube-system, which lacks the label) at %s; got %+v",
						lint.RuleWebhookFailClosedWithoutExclusion, lintHome, hookFile, files)
				}
				t.Logf("lint: %s: %s %s: %s", outage[0].Source, outage[0].Severity, outage[0].Rule, outage[0].Message)
			}

			objs := append(parseLintDocs(t, lintNamespaces), parseLintDocs(t, lintWebhook(exclude))...)
			if err := srv.Apply(ctx, objs...); err != nil {
				t.Fatal(err)
			}
			if err := srv.WaitForAdmissionSync(ctx); err != nil {
				t.Fatal(err)
			}

			// The judge: a write in the webhook's own namespace.
			res, err := srv.DryRunCreate(ctx, configMap(lintHome), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if exclude {
				if !res.Allowed() {
					t.Fatalf("with the exclusion, a ConfigMap in %s must be admitted; got %v", lintHome, res.Status)
				}
			} else {
				if res.Allowed() || !strings.Contains(res.Status.Error(), fmt.Sprintf("failed calling webhook %q", lintHookName)) {
					t.Fatalf("without the exclusion, a ConfigMap in %s must be rejected by the down webhook; got allowed=%v %v", lintHome, res.Allowed(), res.Status)
				}
				t.Logf("kube-apiserver: %s", res.Status.Error())
			}
			// The exclusion does not switch the webhook off elsewhere.
			if res, err = srv.DryRunCreate(ctx, configMap(lintTenant), "", nil); err != nil {
				t.Fatal(err)
			}
			if res.Allowed() {
				t.Fatalf("a ConfigMap in %s must still be rejected while the webhook is down", lintTenant)
			}

			// The same verdict from the live cluster.
			live := runLint(ctx, t, bin, "--kubeconfig", srv.Kubeconfig())
			liveOutage := findingsFor(live, lint.RuleWebhookFailClosedWithoutExclusion, "ValidatingWebhookConfiguration "+lintConfigName)
			if exclude {
				if len(liveOutage) != 0 {
					t.Fatalf("lint --kubeconfig reports the outage rule with the exclusion: %+v", liveOutage)
				}
			} else if len(liveOutage) != 1 || liveOutage[0].Source != "" || !strings.Contains(liveOutage[0].Message, "namespace "+lintHome) {
				t.Fatalf("lint --kubeconfig: want one live %s finding naming %s; got %+v", lint.RuleWebhookFailClosedWithoutExclusion, lintHome, live)
			}
			for _, f := range live {
				if f.Object != "ValidatingWebhookConfiguration "+lintConfigName {
					t.Logf("lint --kubeconfig, about the harness's own objects: %s %s: %s: %s", f.Severity, f.Rule, f.Object, f.Message)
				}
			}
			t.Logf("timing: %s %s (lint on files and live, apply, sync, dry runs)", name, time.Since(phase).Round(time.Millisecond))
		})
	}
	t.Logf("timing: TestLintOutageRule %s", time.Since(start).Round(time.Millisecond))
}

func writeLintFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func parseLintDocs(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// runLint runs `truce lint ARGS --format json --fail-on none` and returns
// its findings.
func runLint(ctx context.Context, t *testing.T, bin string, args ...string) []lint.Finding {
	t.Helper()
	args = append([]string{"lint"}, append(args, "--format", "json", "--fail-on", "none")...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("truce %s: exit %d\n%s", strings.Join(args, " "), exitErr.ExitCode(), stderr.String())
		}
		t.Fatal(err)
	}
	var rep lint.JSONReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("truce %s: %v\n%s", strings.Join(args, " "), err, stdout.String())
	}
	return rep.Findings
}

func findingsFor(fs []lint.Finding, rule, object string) []lint.Finding {
	var out []lint.Finding
	for _, f := range fs {
		if f.Rule == rule && f.Object == object {
			out = append(out, f)
		}
	}
	return out
}
