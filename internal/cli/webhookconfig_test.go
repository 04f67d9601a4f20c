package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/internal/certs"
)

// runWebhookSubcommand runs a `truce webhook` subcommand built by its
// constructor, as the root command would, and returns its output and error.
func runWebhookSubcommand(t *testing.T, newCmd func() *cobra.Command, args ...string) (string, string, error) {
	t.Helper()
	cmd := newCmd()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// writeFiles writes name → content under a new temporary directory.
func webhookTestFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func webhookTestYAML(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(s, -1) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, doc)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out
}

func TestWebhookConfig(t *testing.T) {
	ca, err := certs.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, pair, err := certs.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	dir := webhookTestFiles(t, map[string]string{
		"ca.crt":      string(ca.PEM),
		"key.pem":     string(pair.KeyPEM),
		"garbage.crt": "not PEM",
		"bare/vap.yaml": `# a policy without matchConstraints
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bare
spec:
  validations:
  - expression: "true"
`,
		"badcel/vap.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bad-cel
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  validations:
  - expression: "object.spec.replicas <="
`,
		"wildcard/vap.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: everything
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["*"]
      apiVersions: ["*"]
      operations: [CREATE]
      resources: ["*"]
  validations:
  - expression: "true"
`,
		"none/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
	})
	caFile := filepath.Join(dir, "ca.crt")
	example := "../../examples/image-mirror/cluster"
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantOut    []string
		wantErrOut []string
		check      func(t *testing.T, out string)
	}{
		{
			name: "the example's policies, YAML",
			args: []string{"--policies", example, "--ca-bundle", caFile},
			wantOut: []string{
				"kind: MutatingWebhookConfiguration", "kind: ValidatingWebhookConfiguration",
				"failurePolicy: Ignore", "failurePolicy: Fail", "reinvocationPolicy: IfNeeded",
				"timeoutSeconds: 2", "sideEffects: None", "matchPolicy: Equivalent",
				"name: truce-webhook", "namespace: truce-system", "path: /mutate", "path: /validate", "port: 443",
				"- kube-system\n      - truce-system",
			},
			check: func(t *testing.T, out string) {
				docs := webhookTestYAML(t, out)
				if len(docs) != 2 || docs[0]["kind"] != "MutatingWebhookConfiguration" || docs[1]["kind"] != "ValidatingWebhookConfiguration" {
					t.Fatalf("documents: %v", docs)
				}
			},
		},
		{
			name:    "JSON is a List",
			args:    []string{"--policies", example, "--ca-bundle", caFile, "-o", "json", "--name", "policies", "--timeout-seconds", "5"},
			wantOut: []string{`"kind": "List"`},
			check: func(t *testing.T, out string) {
				var list struct {
					Items []struct {
						Kind     string
						Metadata struct{ Name string }
						Webhooks []struct {
							Name           string
							TimeoutSeconds int
						}
					}
				}
				if err := json.Unmarshal([]byte(out), &list); err != nil {
					t.Fatal(err)
				}
				if len(list.Items) != 2 || list.Items[1].Metadata.Name != "policies" ||
					list.Items[1].Webhooks[0].Name != "policies.validate.truce.dev" || list.Items[1].Webhooks[0].TimeoutSeconds != 5 {
					t.Errorf("items: %+v", list.Items)
				}
			},
		},
		{
			name:    "URL and another namespace",
			args:    []string{"--policies", example + "/replica-limit.yaml", "--ca-bundle", caFile, "--url", "https://truce.example.com:8443", "--namespace", "policy"},
			wantOut: []string{"url: https://truce.example.com:8443/validate", "- kube-system\n      - policy"},
			check: func(t *testing.T, out string) {
				if strings.Contains(out, "MutatingWebhookConfiguration") || strings.Contains(out, "service:") {
					t.Errorf("a mutating configuration or a service:\n%s", out)
				}
			},
		},
		{
			name:       "a wildcard warns on stderr",
			args:       []string{"--policies", filepath.Join(dir, "wildcard"), "--ca-bundle", caFile},
			wantOut:    []string{"truce.dev/exclude-leases"},
			wantErrOut: []string{`warning: ValidatingAdmissionPolicy "everything" matches every resource (*)`},
		},
		{
			name:       "a long timeout is linted",
			args:       []string{"--policies", example, "--ca-bundle", caFile, "--timeout-seconds", "20"},
			wantOut:    []string{"timeoutSeconds: 20"},
			wantErrOut: []string{"generated: warning webhook-timeout-too-long:", "2 findings: 2 warnings"},
		},
		{name: "URL and service", args: []string{"--policies", example, "--ca-bundle", caFile, "--url", "https://x", "--service", "s"}, wantErr: "--url and --service/--port"},
		{name: "http URL", args: []string{"--policies", example, "--ca-bundle", caFile, "--url", "http://x"}, wantErr: "over https only"},
		{name: "no CA bundle flag", args: []string{"--policies", example}, wantErr: `required flag(s) "ca-bundle" not set`},
		{name: "missing CA file", args: []string{"--policies", example, "--ca-bundle", filepath.Join(dir, "nope")}, wantErr: "--ca-bundle: open"},
		{name: "CA file not PEM", args: []string{"--policies", example, "--ca-bundle", filepath.Join(dir, "garbage.crt")}, wantErr: "garbage.crt: CA bundle holds no PEM certificate"},
		{name: "a key as CA", args: []string{"--policies", example, "--ca-bundle", filepath.Join(dir, "key.pem")}, wantErr: "key.pem: CA bundle holds a PEM block of type EC PRIVATE KEY"},
		{name: "bad manifest names file and line", args: []string{"--policies", "testdata/broken.yaml", "--ca-bundle", caFile}, wantErr: "testdata/broken.yaml:8: invalid YAML"},
		{name: "policy without matchConstraints names file and line", args: []string{"--policies", filepath.Join(dir, "bare"), "--ca-bundle", caFile}, wantErr: `vap.yaml:2: ValidatingAdmissionPolicy "bare"`},
		{name: "policy the API server refuses names file and line", args: []string{"--policies", filepath.Join(dir, "badcel"), "--ca-bundle", caFile}, wantErr: `vap.yaml:1: ValidatingAdmissionPolicy "bad-cel" cannot exist in a cluster`},
		{name: "no policies", args: []string{"--policies", filepath.Join(dir, "none"), "--ca-bundle", caFile}, wantErr: "no MutatingAdmissionPolicy or ValidatingAdmissionPolicy found in " + filepath.Join(dir, "none")},
		{name: "unknown output", args: []string{"--policies", example, "--ca-bundle", caFile, "-o", "text"}, wantErr: `unknown output format "text"`},
		{name: "bad timeout", args: []string{"--policies", example, "--ca-bundle", caFile, "--timeout-seconds", "60"}, wantErr: "1 to 30 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runWebhookSubcommand(t, newWebhookConfigCommand, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v\nstderr:\n%s", err, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.wantErrOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if len(tt.wantErrOut) == 0 && errOut != "" {
				t.Errorf("stderr: %s", errOut)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func TestWebhookCerts(t *testing.T) {
	tests := []struct {
		name      string
		existing  []string // files already in --out
		args      []string
		wantErr   string
		wantHosts []string // names the serving certificate must be valid for
	}{
		{
			name:      "defaults",
			args:      []string{},
			wantHosts: []string{"truce-webhook.truce-system.svc", "truce-webhook.truce-system.svc.cluster.local", "truce-webhook"},
		},
		{
			name:      "another service, extra names, a new subdirectory",
			args:      []string{"--service", "policy", "--namespace", "platform", "--dns-name", "truce.example.com", "--validity", "2h"},
			wantHosts: []string{"policy.platform.svc", "truce.example.com"},
		},
		{name: "refuses to overwrite", existing: []string{"tls.key"}, args: []string{}, wantErr: "tls.key exists; pass --force"},
		{name: "--force overwrites", existing: []string{"ca.crt", "tls.crt", "tls.key"}, args: []string{"--force"}, wantHosts: []string{"truce-webhook.truce-system.svc"}},
		{name: "bad validity", args: []string{"--validity", "-1h"}, wantErr: "--validity -1h0m0s: must be positive"},
		{name: "empty service", args: []string{"--service", ""}, wantErr: "must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "certs")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.existing {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, _, err := runWebhookSubcommand(t, newWebhookCertsCommand, append(tt.args, "--out", dir)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				for _, f := range tt.existing {
					if data, _ := os.ReadFile(filepath.Join(dir, f)); string(data) != "old" {
						t.Errorf("%s was changed", f)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "next: truce webhook config") {
				t.Errorf("stdout: %s", out)
			}
			read := func(name string, mode os.FileMode) []byte {
				p := filepath.Join(dir, name)
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != mode {
					t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), mode)
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				return data
			}
			caPEM, certPEM, keyPEM := read("ca.crt", 0o644), read("tls.crt", 0o644), read("tls.key", 0o600)
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("tls.crt and tls.key: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(caPEM) {
				t.Fatal("ca.crt does not parse")
			}
			block, _ := pem.Decode(certPEM)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, host := range tt.wantHosts {
				if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
					t.Errorf("not valid for %s: %v", host, err)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 3 {
				t.Errorf("%d files in --out, want 3 (no temporary files left)", len(entries))
			}
		})
	}
}

// TestWebhookCertsThenConfig: the two commands together, as docs/webhook.md
// and deploy/README.md use them.
func TestWebhookCertsThenConfig(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := runWebhookSubcommand(t, newWebhookCertsCommand, "--out", dir); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWebhookSubcommand(t, newWebhookConfigCommand, "--policies", "../../deploy/policies", "--ca-bundle", filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	docs := webhookTestYAML(t, out)
	if len(docs) != 2 {
		t.Fatalf("%d documents", len(docs))
	}
	for _, d := range docs {
		data, _ := json.Marshal(d["webhooks"])
		var hooks []struct{ ClientConfig struct{ CABundle []byte } }
		if err := json.Unmarshal(data, &hooks); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hooks[0].ClientConfig.CABundle, ca) {
			t.Errorf("%s: caBundle is not ca.crt", d["kind"])
		}
	}
}
