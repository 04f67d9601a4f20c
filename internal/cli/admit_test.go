package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAdmitExample(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    []string
		wantErrOut string
	}{
		{
			name:     "text",
			args:     []string{"admit", "-f", "../../examples/image-mirror/app", "-f", "../../examples/image-mirror/batch", "-c", "../../examples/image-mirror/cluster"},
			wantCode: 1,
			wantOut: []string{
				`batch.yaml:2  CREATE Deployment shop/batch: DENIED (422 Invalid): deployments.apps "batch" is forbidden: ValidatingAdmissionPolicy 'replica-limit.example.com' with binding 'replica-limit-binding.example.com' denied request: at most 5 replicas in a test environment`,
				`web.yaml:2  CREATE Deployment shop/web: admitted`,
				`/spec/template/spec/containers/0/image  changed by MutatingAdmissionPolicy/image-mirror.example.com (binding image-mirror-binding.example.com)`,
			},
		},
		{
			name:     "only the admitted write exits 0",
			args:     []string{"admit", "-f", "../../examples/image-mirror/app/web.yaml", "-c", "../../examples/image-mirror/cluster", "-o", "yaml"},
			wantCode: 0,
			wantOut:  []string{"image: registry.internal/nginx:1.27", "name: web"},
		},
		{
			name:       "bad manifest names file and line",
			args:       []string{"admit", "-f", "testdata/broken.yaml"},
			wantCode:   2,
			wantErrOut: "testdata/broken.yaml:8: invalid YAML",
		},
		{
			name:       "invalid policy in the cluster names file and line",
			args:       []string{"admit", "-f", "../../examples/image-mirror/app/web.yaml", "-c", "testdata/bad-vap.yaml"},
			wantCode:   2,
			wantErrOut: `testdata/bad-vap.yaml:2: ValidatingAdmissionPolicy "bad" cannot exist in a cluster`,
		},
		{
			name:       "unknown output format",
			args:       []string{"admit", "-f", "../../examples/image-mirror/app", "-o", "xml"},
			wantCode:   2,
			wantErrOut: `unknown output format "xml"`,
		},
		{
			name:       "bad webhook endpoint",
			args:       []string{"admit", "-f", "../../examples/image-mirror/app", "--webhook-endpoint", "svc=https://x"},
			wantCode:   2,
			wantErrOut: `want NAMESPACE/SERVICE=URL`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tt.wantErrOut) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErrOut, errOut)
			}
		})
	}
}

func TestAdmitJSONContract(t *testing.T) {
	code, out, errOut := run(t, "admit", "-o", "json", "-f", "../../examples/image-mirror/batch", "-f", "../../examples/image-mirror/app", "-c", "../../examples/image-mirror/cluster")
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Results []struct {
			Source    string            `json:"source"`
			Operation string            `json:"operation"`
			Name      string            `json:"name"`
			Allowed   bool              `json:"allowed"`
			Code      int               `json:"code"`
			Reason    string            `json:"reason"`
			Warnings  []string          `json:"warnings"`
			Audit     map[string]string `json:"auditAnnotations"`
			Object    map[string]any    `json:"object"`
			Changes   []struct {
				Path, By string
				Round    int
			} `json:"changes"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if len(doc.Results) != 2 {
		t.Fatalf("got %d results", len(doc.Results))
	}
	batch, web := doc.Results[0], doc.Results[1]
	if batch.Name != "batch" || batch.Allowed || batch.Code != 422 || batch.Reason != "Invalid" || batch.Object != nil {
		t.Errorf("batch: %+v", batch)
	}
	if web.Name != "web" || !web.Allowed || web.Operation != "CREATE" || web.Warnings == nil || web.Audit == nil {
		t.Errorf("web: %+v", web)
	}
	if len(web.Changes) != 1 || web.Changes[0].Path != "/spec/template/spec/containers/0/image" {
		t.Errorf("web changes: %+v", web.Changes)
	}
}

func TestAdmitManagedFields(t *testing.T) {
	// A CREATE, then an UPDATE of an object of -c.
	base := []string{"admit", "-f", "testdata/managedfields/write.yaml", "-c", "testdata/managedfields/cluster.yaml"}
	tests := []struct {
		name string
		args []string
		// want lists the managers of each result's managedFields, sorted
		// (the server orders entries by time); nil means the output has
		// none.
		want [][]string
	}{
		{"hidden unless asked", []string{"-o", "json"}, nil},
		{"kubectl apply's manager by default", []string{"-o", "json", "--show-managed-fields"}, [][]string{{"kubectl-client-side-apply"}, {"kubectl-client-side-apply", "kubectl-create"}}},
		{"kubectl create's and replace's with --replace", []string{"-o", "json", "--show-managed-fields", "--replace"}, [][]string{{"kubectl-create"}, {"kubectl-create", "kubectl-replace"}}},
		{"kubectl's with --server-side", []string{"-o", "json", "--show-managed-fields", "--server-side", "--force-conflicts"}, [][]string{{"kubectl"}, {"kubectl", "kubectl-create"}}},
		{"--field-manager", []string{"-o", "json", "--show-managed-fields", "--field-manager", "ci"}, [][]string{{"ci"}, {"ci", "kubectl-create"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append(base, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var doc struct {
				Results []struct {
					Operation string `json:"operation"`
					Object    struct {
						Metadata struct {
							ManagedFields []struct {
								Manager string `json:"manager"`
							} `json:"managedFields"`
						} `json:"metadata"`
					} `json:"object"`
				} `json:"results"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("decoding %s: %v", out, err)
			}
			if len(doc.Results) != 2 || doc.Results[0].Operation != "CREATE" || doc.Results[1].Operation != "UPDATE" {
				t.Fatalf("want a CREATE and an UPDATE, got %+v", doc.Results)
			}
			var got [][]string
			for _, r := range doc.Results {
				var managers []string
				for _, e := range r.Object.Metadata.ManagedFields {
					managers = append(managers, e.Manager)
				}
				if managers != nil {
					sort.Strings(managers)
					got = append(got, managers)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("managers %q, want %q", got, tt.want)
			}
		})
	}
	for _, show := range []bool{false, true} {
		args := append(base, "-o", "yaml")
		if show {
			args = append(args, "--show-managed-fields")
		}
		if code, out, errOut := run(t, args...); code != 0 || strings.Contains(out, "managedFields") != show {
			t.Errorf("-o yaml, --show-managed-fields=%v: exit %d, managedFields printed: %v\n%s", show, code, strings.Contains(out, "managedFields"), errOut)
		}
	}
}

// TestAdmitVerbFlags: the verb flags are checked before anything is read,
// with errors that name the flag.
func TestAdmitVerbFlags(t *testing.T) {
	f := []string{"admit", "-f", "testdata/managedfields/write.yaml", "-c", "testdata/managedfields/cluster.yaml"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"two verbs", append(f, "--delete", "--replace"), "--replace and --delete: give one verb"},
		{"force without server-side", append(f, "--force-conflicts"), "--force-conflicts needs --server-side"},
		{"type without patch", append(f, "--type", "merge"), "--type needs --patch"},
		{"unknown patch type", append(f, "--patch", "{}", "--type", "xml"), `unknown patch type "xml"`},
		{"bad cascade", append(f, "--delete", "--cascade", "sideways"), `unknown --cascade "sideways"`},
		{"negative scale", append(f, "--scale", "-1"), "must not be negative"},
		{"exec without command", []string{"admit", "--exec", "p"}, "--exec needs the command after --"},
		{"exec with -f", append(f, "--exec", "p", "--", "sh"), "-f is not used"},
		{"command without exec", append(f, "--", "sh"), "a command after -- needs --exec"},
		{"no -f", []string{"admit"}, "-f is required"},
		{"container without exec", append(f, "--container", "c"), "--container needs --exec or --attach"},
		{"delete live", append(f[:3], "--delete", "--dry-run=server", "--kubeconfig", "/nonexistent"), "--delete is offline only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}

// TestAdmitVerbs: each verb reaches the chain as its kubectl command.
func TestAdmitVerbs(t *testing.T) {
	f := []string{"admit", "-f", "testdata/managedfields/write.yaml", "-c", "testdata/managedfields/cluster.yaml", "-o", "json"}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOps  []string
	}{
		{"apply", f, 0, []string{"CREATE", "UPDATE"}},
		{"delete", append(f, "--delete"), 1, []string{"DELETE", "DELETE"}},
		{"patch", append(f, "--patch", "data: {x: '1'}", "--type", "merge"), 1, []string{"UPDATE", "UPDATE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s\n%s", code, tt.wantCode, errOut, out)
			}
			var doc struct {
				Results []struct {
					Operation string `json:"operation"`
				} `json:"results"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			var ops []string
			for _, r := range doc.Results {
				ops = append(ops, r.Operation)
			}
			if !reflect.DeepEqual(ops, tt.wantOps) {
				t.Errorf("operations %v, want %v", ops, tt.wantOps)
			}
		})
	}
}
