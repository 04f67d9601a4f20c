package apiserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAuditLogIncremental: events are indexed by audit ID, only the final
// stage counts, and a line still being written is picked up once complete.
func TestAuditLogIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a := newAuditLog(path)
	if ev, err := a.lookup("x"); ev != nil || err != nil {
		t.Fatalf("missing file: got %v, %v", ev, err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := func(id, stage string) string {
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id +
			`","stage":"` + stage + `","annotations":{"k":"` + id + `"}}` + "\n"
	}
	full := line("b", "ResponseComplete")
	if _, err := f.WriteString(line("a", "ResponseStarted") + line("a", "ResponseComplete") + full[:20]); err != nil {
		t.Fatal(err)
	}
	if ev, _ := a.lookup("a"); ev == nil || ev.Annotations["k"] != "a" {
		t.Fatalf("event a: %+v", ev)
	}
	if ev, _ := a.lookup("b"); ev != nil {
		t.Fatalf("half-written event b returned: %+v", ev)
	}
	if _, err := f.WriteString(full[20:]); err != nil {
		t.Fatal(err)
	}
	if ev, _ := a.lookup("b"); ev == nil || ev.Annotations["k"] != "b" {
		t.Fatalf("event b: %+v", ev)
	}
}

// TestSentinelObjects: every generation-dependent field carries the
// generation, and nothing is left unexpanded.
func TestSentinelObjects(t *testing.T) {
	objs, err := sentinelObjects(42)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
		if o.GetLabels()[SentinelLabel] != "true" {
			t.Errorf("%s without %s label", o.GetKind(), SentinelLabel)
		}
		data, _ := o.MarshalJSON()
		if strings.Contains(string(data), "{{") {
			t.Errorf("%s has an unexpanded placeholder: %s", o.GetKind(), data)
		}
		if o.GetKind() != "CustomResourceDefinition" && !strings.Contains(string(data), "42") {
			t.Errorf("%s does not carry the generation", o.GetKind())
		}
	}
	for _, k := range []string{"Namespace", "CustomResourceDefinition", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if !kinds[k] {
			t.Errorf("no sentinel %s", k)
		}
	}
	// Every selector must select the probe and the sentinel namespace.
	probe := sentinelProbe(42)
	for _, o := range objs {
		var selectors [][]string
		switch o.GetKind() {
		case "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicyBinding":
			selectors = [][]string{{"spec", "matchResources", "objectSelector", "matchLabels"}, {"spec", "matchResources", "namespaceSelector", "matchLabels"}}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				hm := h.(map[string]any)
				for _, f := range []string{"objectSelector", "namespaceSelector"} {
					for k, v := range hm[f].(map[string]any)["matchLabels"].(map[string]any) {
						if probe.GetLabels()[k] != v {
							t.Errorf("%s %s selects %s=%v, probe has %q", o.GetKind(), f, k, v, probe.GetLabels()[k])
						}
					}
				}
			}
		}
		for _, path := range selectors {
			ml, _, _ := unstructured.NestedStringMap(o.Object, path...)
			if len(ml) == 0 {
				t.Errorf("%s: no %v", o.GetKind(), path)
			}
			for k, v := range ml {
				if probe.GetLabels()[k] != v {
					t.Errorf("%s %v selects %s=%s, probe has %q", o.GetKind(), path, k, v, probe.GetLabels()[k])
				}
			}
		}
		if o.GetKind() == "Namespace" && o.GetLabels()[sentinelGenLabel] != "42" {
			t.Errorf("sentinel namespace labels %v", o.GetLabels())
		}
	}
	if !isSystemNamespace(SentinelNamespace) {
		t.Error("Cleanup would delete the sentinel namespace")
	}
}

func TestServiceEndpoints(t *testing.T) {
	var s ServiceEndpoints
	if _, err := s.ResolveEndpoint("ns", "svc", 443); err == nil {
		t.Error("unregistered service resolved")
	}
	if err := s.Set("ns", "svc", "http://x"); err == nil {
		t.Error("http endpoint accepted")
	}
	if err := s.Set("ns", "svc", "https://127.0.0.1:8443"); err != nil {
		t.Fatal(err)
	}
	u, err := s.ResolveEndpoint("ns", "svc", 443)
	if err != nil || u.String() != "https://127.0.0.1:8443" {
		t.Errorf("resolved to %v, %v", u, err)
	}
	if got := strings.Join(s.Flags(), " "); got != "--webhook-endpoint=ns/svc=https://127.0.0.1:8443" {
		t.Errorf("flags %q", got)
	}
	s.Delete("ns", "svc")
	if _, err := s.ResolveEndpoint("ns", "svc", 443); err == nil {
		t.Error("deleted service resolved")
	}
}
