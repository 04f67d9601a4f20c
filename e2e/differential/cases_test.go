package differential

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/e2e/apiserver"
)

// TestCorpusLoads keeps the corpus well-formed without a server: every case
// parses, has exactly one write, a strict case.yaml, and an expectation.
func TestCorpusLoads(t *testing.T) {
	cases, err := LoadCases(filepath.Join("..", "testdata", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10 {
		t.Errorf("only %d cases", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.ID()] {
			t.Errorf("duplicate case %s", c.ID())
		}
		seen[c.ID()] = true
		if c.Spec.Description == "" {
			t.Errorf("%s: case.yaml has no description", c.ID())
		}
		if c.Spec.Expect == nil {
			t.Errorf("%s: case.yaml has no expect", c.ID())
		}
		if len(c.Spec.Groups) > 0 && c.Spec.User == "" {
			t.Errorf("%s: groups without user", c.ID())
		}
	}
}

func TestParseDocsSourceLines(t *testing.T) {
	data := []byte(`# leading comment
---
apiVersion: v1
kind: Namespace
metadata: {name: a}
---

# comment in front
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
---
---
`)
	docs, err := ParseDocs(data, "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Source+" "+d.Object.GetKind())
	}
	want := "cluster.yaml:3 Namespace,cluster.yaml:9 ConfigMap"
	if strings.Join(got, ",") != want {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseDocs([]byte("metadata: {name: x}\n"), "w.yaml"); err == nil {
		t.Error("object without apiVersion/kind accepted")
	}
}

func TestWriteOperation(t *testing.T) {
	docs, err := ParseDocs([]byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
---
apiVersion: v1
kind: Namespace
metadata: {name: cm}
`), "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	namespaced := func(gvk schema.GroupVersionKind) (bool, error) { return gvk.Kind != "Namespace", nil }
	for _, tc := range []struct {
		write string
		want  apiserver.Operation
	}{
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\n", apiserver.Update},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: other}\n", apiserver.Create},
		{"apiVersion: v1\nkind: Secret\nmetadata: {name: cm}\n", apiserver.Create},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: cm}\n", apiserver.Update},
	} {
		w, err := ParseDocs([]byte(tc.write), "write.yaml")
		if err != nil {
			t.Fatal(err)
		}
		c := &Case{Cluster: docs, Write: w[0]}
		got, err := c.WriteOperation(namespaced)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.write, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	server := Result{
		Operation: "CREATE", Allowed: true,
		Warnings: []string{"b", "a"},
		Object: map[string]any{
			"metadata": map[string]any{"name": "x", "uid": "1", "resourceVersion": "5", "generation": int64(1)},
			"spec":     map[string]any{"replicas": int64(3)},
		},
		AuditAnnotations: map[string]string{"authorization.k8s.io/decision": "allow", "x/y": "z"},
	}
	truce := Result{
		Operation: "CREATE", Allowed: true,
		Warnings: []string{"a", "b"},
		Object: map[string]any{
			"metadata": map[string]any{"name": "x"},
			"spec":     map[string]any{"replicas": float64(3)},
		},
		AuditAnnotations: map[string]string{"x/y": "z"},
	}
	if d := Compare(server, truce, CompareOptions{AuditAnnotations: true}); len(d) != 0 {
		t.Errorf("expected no differences, got %v", d)
	}
	truce.Object["spec"] = map[string]any{"replicas": float64(4)}
	truce.Warnings = []string{"a"}
	if d := Compare(server, truce, CompareOptions{}); len(d) != 2 {
		t.Errorf("expected 2 differences (warnings, object), got %d: %v", len(d), d)
	}
	denied := Result{Operation: "CREATE", Code: 422, Reason: "Invalid", Message: "m"}
	other := denied
	other.Message = "n"
	if d := Compare(denied, other, CompareOptions{}); len(d) != 1 || !strings.Contains(d[0], "message") {
		t.Errorf("expected a message difference, got %v", d)
	}
	if d := Compare(denied, server, CompareOptions{}); len(d) == 0 {
		t.Error("allowed vs denied not reported")
	}
}

func TestCompareManagedFields(t *testing.T) {
	entry := func(manager, time string, fields map[string]any) map[string]any {
		return map[string]any{"manager": manager, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "time": time, "fieldsV1": fields}
	}
	labels := map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:app": map[string]any{}}}}
	data := map[string]any{"f:data": map[string]any{"f:key": map[string]any{}}}
	result := func(entries ...any) Result {
		return Result{Operation: "UPDATE", Allowed: true, Object: map[string]any{
			"metadata": map[string]any{"name": "x", "managedFields": entries},
		}}
	}
	server := result(entry("kubectl-create", "2026-01-01T00:00:00Z", labels), entry("kubectl-replace", "2026-01-01T00:00:05Z", data))
	for _, tc := range []struct {
		name  string
		truce Result
		diffs int
	}{
		{"other times, other order", result(entry("kubectl-replace", "2026-02-01T00:00:00Z", data), entry("kubectl-create", "2026-02-01T00:00:00Z", labels)), 0},
		{"other manager", result(entry("kubectl-create", "", labels), entry("truce", "", data)), 1},
		{"other fields", result(entry("kubectl-create", "", labels), entry("kubectl-replace", "", labels)), 1},
		{"no managedFields", Result{Operation: "UPDATE", Allowed: true, Object: map[string]any{"metadata": map[string]any{"name": "x"}}}, 1},
	} {
		if d := Compare(server, tc.truce, CompareOptions{}); len(d) != tc.diffs {
			t.Errorf("%s: %d differences, want %d: %v", tc.name, len(d), tc.diffs, d)
		}
	}
}

func TestCheckExpect(t *testing.T) {
	f := false
	r := Result{
		Operation: "CREATE", Allowed: true, Warnings: []string{"unknown field \"spec.x\""},
		Object: map[string]any{"spec": map[string]any{"size": int64(3), "list": []any{"a", "b"}}},
	}
	e := &Expect{
		Allowed:         &f,
		WarningsContain: []string{"spec.x"},
		Object:          map[string]any{"spec": map[string]any{"size": float64(3), "list": []any{"a"}}},
	}
	d := CheckExpect(e, r)
	if len(d) != 2 {
		t.Fatalf("want 2 differences (allowed, list length), got %v", d)
	}
	e.Allowed, e.Object = nil, map[string]any{"spec": map[string]any{"size": 3}}
	if d := CheckExpect(e, r); len(d) != 0 {
		t.Errorf("want none, got %v", d)
	}
}

func TestExpand(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "webhook", "x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(ClusterFile, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {url: \"{{WEBHOOK_URL}}/allow\"}\n")
	write(WriteFile, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	write(SpecFile, "description: d\nunpredictableWebhooks: [w]\n")
	c, err := LoadCase(dir)
	if err != nil {
		t.Fatal(err)
	}
	if has, err := c.HasPlaceholders(); err != nil || !has {
		t.Fatalf("HasPlaceholders = %v, %v", has, err)
	}
	out, err := c.Expand(map[string]string{"WEBHOOK_URL": "https://127.0.0.1:1"}, filepath.Join(t.TempDir(), "e"))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Cluster[0].Object.Object["data"].(map[string]any)["url"]; got != "https://127.0.0.1:1/allow" {
		t.Errorf("expanded url %v", got)
	}
	if out.ID() != "webhook/x" || len(out.Spec.UnpredictableWebhooks) != 1 {
		t.Errorf("expanded case %s %+v", out.ID(), out.Spec)
	}
	if _, err := c.Expand(map[string]string{}, filepath.Join(t.TempDir(), "f")); err == nil {
		t.Error("unknown placeholder accepted")
	}
}

func TestCompareWebhookRules(t *testing.T) {
	server := Result{Operation: "CREATE", Code: 500, Reason: "InternalError", Message: "dial tcp: refused",
		AuditAnnotations: map[string]string{"mutation.webhook.admission.k8s.io/round_0_index_0": "m"}}
	truce := server
	truce.Message = "truce: no endpoint"
	truce.Unpredictable = []string{"mutating webhook w.example.com (ns/svc)"}
	truce.AuditAnnotations = map[string]string{"mutation.webhook.admission.k8s.io/round_0_index_0": "m", "patch.webhook.admission.k8s.io/round_0_index_0": "p"}
	if d := Compare(server, truce, CompareOptions{AuditAnnotations: true, AuditLevel: "Metadata", UnpredictableWebhooks: []string{"w.example.com"}}); len(d) != 0 {
		t.Errorf("want no differences, got %v", d)
	}
	if d := Compare(server, truce, CompareOptions{AuditAnnotations: true, AuditLevel: "Request", UnpredictableWebhooks: []string{"w.example.com"}}); len(d) != 1 {
		t.Errorf("want the Request-level annotation reported, got %v", d)
	}
	// Without unpredictableWebhooks: the message and the unpredictable list count.
	if d := Compare(server, truce, CompareOptions{}); len(d) != 2 {
		t.Errorf("want message and unpredictable differences, got %v", d)
	}
	truce.Unpredictable = nil
	truce.Message = server.Message
	if d := Compare(server, truce, CompareOptions{UnpredictableWebhooks: []string{"w.example.com"}}); len(d) != 1 {
		t.Errorf("want the missing unpredictable webhook reported, got %v", d)
	}
}
