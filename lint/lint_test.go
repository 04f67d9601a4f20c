package lint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
)

func TestRulesSortedAndUnique(t *testing.T) {
	rules := Rules()
	for i := 1; i < len(rules); i++ {
		if rules[i-1].ID >= rules[i].ID {
			t.Errorf("rules not sorted or duplicated: %s before %s", rules[i-1].ID, rules[i].ID)
		}
	}
}

func TestRunDisable(t *testing.T) {
	in := loadExample(t, RuleWebhookTimeoutTooLong, "bad.yaml")
	fs, err := Run(context.Background(), in, Options{Disable: []string{RuleWebhookTimeoutTooLong}})
	if err != nil {
		t.Fatal(err)
	}
	if len(findingsOf(fs, RuleWebhookTimeoutTooLong)) != 0 {
		t.Errorf("disabled rule reported: %+v", fs)
	}
	if _, err := Run(context.Background(), in, Options{Disable: []string{"webhook-timeout-too-lng"}}); err == nil ||
		!strings.Contains(err.Error(), `unknown rule "webhook-timeout-too-lng"`) {
		t.Errorf("an unknown rule id must be an error, got %v", err)
	}
	fs, err = Run(context.Background(), in, Options{MaxWebhookTimeout: 20e9})
	if err != nil {
		t.Fatal(err)
	}
	// timeoutSeconds unset is reported whatever the limit: the default
	// hides the choice.
	if len(findingsOf(fs, RuleWebhookTimeoutTooLong)) != 1 {
		t.Errorf("unset timeout with a 20s limit: %+v", fs)
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, &Input{}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestSortFindings(t *testing.T) {
	fs := []Finding{
		{Source: "", Rule: "a", Object: "X live"},
		{Source: "b.yaml:10", Rule: "a"},
		{Source: "b.yaml:9", Rule: "b"},
		{Source: "b.yaml:9", Rule: "a"},
		{Source: "a.yaml", Rule: "z"},
	}
	SortFindings(fs)
	var got []string
	for _, f := range fs {
		got = append(got, f.Source+"/"+f.Rule)
	}
	want := "a.yaml/z b.yaml:9/a b.yaml:9/b b.yaml:10/a /a"
	if strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
}

func TestSplitSource(t *testing.T) {
	for _, tt := range []struct {
		in   string
		file string
		line int
	}{
		{"a.yaml:12", "a.yaml", 12},
		{"a.yaml", "a.yaml", 0},
		{"C:/x/a.yaml:3", "C:/x/a.yaml", 3},
		{"base/d.yaml:4 (kustomization overlay/kustomization.yaml)", "base/d.yaml (kustomization overlay/kustomization.yaml)", 4},
		{"", "", 0},
	} {
		f, l := SplitSource(tt.in)
		if f != tt.file || l != tt.line {
			t.Errorf("SplitSource(%q) = %q, %d; want %q, %d", tt.in, f, l, tt.file, tt.line)
		}
	}
}

func obj(kind, ns, name string, src manifest.Source) manifest.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return manifest.Object{Source: src, Object: u}
}

func TestWithLive(t *testing.T) {
	file := manifest.Source{File: "cm.yaml", Line: 1}
	live := manifest.Source{File: LiveSource}
	got := WithLive(
		[]manifest.Object{obj("ConfigMap", "a", "x", file)},
		[]manifest.Object{obj("ConfigMap", "a", "x", live), obj("ConfigMap", "b", "x", live), obj("Namespace", "", "a", live)},
	)
	if len(got) != 3 || got[0].Source != file || got[1].Object.GetNamespace() != "b" || got[2].Object.GetKind() != "Namespace" {
		t.Errorf("got %+v", got)
	}
}

func TestLiveFindingHasNoSource(t *testing.T) {
	o := obj("ConfigMap", "a", "x", manifest.Source{File: LiveSource})
	f := finding(o, "m", "w", "f")
	if f.Source != "" || f.Object != "ConfigMap a/x" {
		t.Errorf("got %+v", f)
	}
}

func TestOneEdit(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"replica-limit", "replica-limits", true},
		{"replica-limit", "replica-limet", true},
		{"replica-limit", "replica-lim", false},
		{"same", "same", false},
		{"", "a", true},
	} {
		if got := oneEdit(tt.a, tt.b); got != tt.want {
			t.Errorf("oneEdit(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func sampleFindings() []Finding {
	return []Finding{
		{Rule: RuleWebhookFailClosedWithoutExclusion, Severity: SeverityError, Source: "cluster/hooks.yaml:3", Object: "ValidatingWebhookConfiguration p",
			Message: "webhooks[0] \"v\" fails closed", Why: "why", Fix: "fix"},
		{Rule: RuleWebhookTimeoutTooLong, Severity: SeverityWarning, Source: "", Object: "MutatingWebhookConfiguration m",
			Message: "no timeout", Why: "why2", Fix: "fix2"},
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleFindings()); err != nil {
		t.Fatal(err)
	}
	want := `cluster/hooks.yaml:3: error webhook-fail-closed-without-exclusion: webhooks[0] "v" fails closed
    object: ValidatingWebhookConfiguration p
    why: why
    fix: fix
MutatingWebhookConfiguration m (live): warning webhook-timeout-too-long: no timeout
    why: why2
    fix: fix2

2 findings: 1 error, 1 warning
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteText(&b, nil); err != nil || b.String() != "no findings\n" {
		t.Errorf("no findings: %q %v", b.String(), err)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, nil); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(b.String()) != "{\n  \"findings\": []\n}" {
		t.Errorf("empty: %s", b.String())
	}
	b.Reset()
	if err := WriteJSON(&b, sampleFindings()); err != nil {
		t.Fatal(err)
	}
	var got JSONReport
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Findings) != 2 || got.Findings[0].Rule != RuleWebhookFailClosedWithoutExclusion || got.Findings[1].Source != "" {
		t.Errorf("got %+v", got)
	}
	for _, key := range []string{`"rule"`, `"severity"`, `"source"`, `"object"`, `"message"`, `"why"`, `"fix"`} {
		if !strings.Contains(b.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}
