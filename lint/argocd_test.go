package lint

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/drift/ignore"
)

func TestUnescapedSlash(t *testing.T) {
	tests := []struct {
		pointer string
		want    string // the corrected pointer, "" when fine
	}{
		{"/metadata/annotations/example.com/last-scan", "/metadata/annotations/example.com~1last-scan"},
		{"/metadata/labels/app.kubernetes.io/part-of", "/metadata/labels/app.kubernetes.io~1part-of"},
		{"/spec/template/metadata/annotations/sidecar.istio.io/status", "/spec/template/metadata/annotations/sidecar.istio.io~1status"},
		{"/metadata/annotations/a/b/c", "/metadata/annotations/a~1b~1c"},
		{"/metadata/annotations/example.com~1last-scan", ""},
		{"/metadata/annotations/plain", ""},
		{"/metadata/annotations", ""},
		{"/spec/labels/a/b", ""}, // not metadata's
		{"/data/labels/x/y", ""},
	}
	for _, tt := range tests {
		t.Run(tt.pointer, func(t *testing.T) {
			tokens, err := ignore.ParsePointer(tt.pointer)
			if err != nil {
				t.Fatal(err)
			}
			fixed, ok := unescapedSlash(tokens)
			got := ""
			if ok {
				got = ignore.FormatPointer(fixed)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, annotations: {"0": zero}}
spec:
  template:
    metadata:
      labels: {"1": one}
    spec:
      containers:
      - name: istio-proxy
        image: proxy:1
        args: [--a, --b]
      - name: web
        image: nginx:1.27
        ports: [{name: http, containerPort: 80}]
`

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestListIndexesAndJQ(t *testing.T) {
	objs := []*unstructured.Unstructured{decode(t, deployment)}
	tests := []struct {
		pointer     string
		objs        []*unstructured.Unstructured
		indexes     []int
		jq          string
		placeholder bool
	}{
		{"/spec/template/spec/containers/1/image", objs, []int{4}, `.spec.template.spec.containers[] | select(.name == "web") | .image`, false},
		{"/spec/template/spec/containers/0", objs, []int{4}, `.spec.template.spec.containers[] | select(.name == "istio-proxy")`, false},
		{"/spec/template/spec/containers/1/ports/0/containerPort", objs, []int{4, 6},
			`.spec.template.spec.containers[] | select(.name == "web") | .ports[] | select(.name == "http") | .containerPort`, false},
		{"/spec/template/spec/containers/0/args/1", objs, []int{4, 6}, `.spec.template.spec.containers[] | select(.name == "istio-proxy") | .args[1]`, false},
		{"/spec/template/spec/containers/0/image", nil, []int{4}, `.spec.template.spec.containers[] | select(.name == "NAME") | .image`, true},
		{"/spec/rules/0/host", nil, []int{2}, `.spec.rules[0].host`, false},
		// Numeric map keys are not list indexes.
		{"/metadata/annotations/0", objs, nil, `.metadata.annotations["0"]`, false},
		{"/spec/template/metadata/labels/1", nil, nil, `.spec.template.metadata.labels["1"]`, false},
		{"/spec/replicas", objs, nil, `.spec.replicas`, false},
	}
	for _, tt := range tests {
		t.Run(tt.pointer, func(t *testing.T) {
			tokens, err := ignore.ParsePointer(tt.pointer)
			if err != nil {
				t.Fatal(err)
			}
			if got := listIndexes(tokens, tt.objs); !reflect.DeepEqual(got, tt.indexes) {
				t.Errorf("indexes %v, want %v", got, tt.indexes)
			}
			jq, placeholder := jqPath(tokens, tt.objs)
			if jq != tt.jq || placeholder != tt.placeholder {
				t.Errorf("jq %q (placeholder %v), want %q (%v)", jq, placeholder, tt.jq, tt.placeholder)
			}
			// The expression must be one Argo CD accepts, and (without a
			// placeholder, on the object) select exactly the pointer's
			// field.
			r := ignore.Rule{Tool: ignore.ArgoCD, Target: ignore.Target{Kind: "Deployment"}, JQPathExpressions: []string{jq}}
			if err := r.Validate(); err != nil {
				t.Fatalf("Argo CD would reject %q: %v", jq, err)
			}
			if tt.objs == nil || placeholder {
				return
			}
			if got := jqPaths(t, jq, tt.objs[0].Object); len(got) != 1 || ignore.FormatPointer(got[0]) != tt.pointer {
				t.Errorf("%q selects %v, want exactly %s", jq, got, tt.pointer)
			}
		})
	}
}

// jqPaths returns the paths expr selects in doc, as pointer tokens.
func jqPaths(t *testing.T, expr string, doc map[string]any) [][]string {
	t.Helper()
	q, err := gojq.Parse("path(" + expr + ")")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	iter := q.Run(doc)
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := v.(error); ok {
			t.Fatalf("%s: %v", expr, err)
		}
		var tokens []string
		for _, p := range v.([]any) {
			tokens = append(tokens, fmt.Sprint(p))
		}
		out = append(out, tokens)
	}
	return out
}

func TestPointerRulesOnArgoCM(t *testing.T) {
	in := objects(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd}
data:
  resource.customizations.ignoreDifferences.apps_Deployment: |
    jsonPointers:
    - /spec/template/spec/containers/0/image
    - /metadata/annotations/example.com/owner
`)
	slash, err := checkPointerUnescapedSlash(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	index, err := checkPointerListIndex(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(slash) != 1 || !strings.Contains(slash[0].Message, "data[resource.customizations.ignoreDifferences.apps_Deployment].jsonPointers[1]") ||
		!strings.Contains(slash[0].Fix, "/metadata/annotations/example.com~1owner") {
		t.Errorf("unescaped slash: %+v", slash)
	}
	if len(index) != 1 || !strings.Contains(index[0].Fix, `select(.name == "NAME")`) {
		t.Errorf("list index: %+v", index)
	}
}

func TestIgnoreWithoutRespect(t *testing.T) {
	app := func(syncPolicy string) string {
		return `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  ignoreDifferences: [{group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}]
  syncPolicy: ` + syncPolicy
	}
	for _, tt := range []struct {
		syncPolicy string
		want       bool
	}{
		{`{automated: {selfHeal: true}}`, true},
		{`{automated: {selfHeal: true}, syncOptions: [RespectIgnoreDifferences=true]}`, false},
		{`{automated: {selfHeal: true}, syncOptions: [RespectIgnoreDifferences=True]}`, true}, // Argo CD compares exact strings
		{`{automated: {selfHeal: false}}`, false},
		{`{automated: {enabled: false, selfHeal: true}}`, false},
		{`{}`, false},
	} {
		fs, err := checkIgnoreWithoutRespect(context.Background(), objects(t, app(tt.syncPolicy)))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(fs) == 1; got != tt.want {
			t.Errorf("%s: got %+v, want a finding: %v", tt.syncPolicy, fs, tt.want)
		}
	}
}

func TestLabelTracking(t *testing.T) {
	cm := func(method string) string {
		data := "{}"
		if method != "" {
			data = "{application.resourceTrackingMethod: " + method + "}"
		}
		return `{apiVersion: v1, kind: ConfigMap, metadata: {name: argocd-cm, namespace: argocd}, data: ` + data + `}`
	}
	generate := `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: p}, spec: {rules: [{name: g, generate: {kind: Secret}}]}}`
	generating := `{apiVersion: policies.kyverno.io/v1, kind: GeneratingPolicy, metadata: {name: gp}, spec: {}}`
	mutate := `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: m}, spec: {rules: [{name: r, mutate: {}}]}}`
	for _, tt := range []struct {
		name string
		docs []string
		want int
	}{
		{"label + generate", []string{cm("label"), generate}, 1},
		{"label + GeneratingPolicy", []string{cm("label"), generating}, 1},
		{"label + mutate only", []string{cm("label"), mutate}, 0},
		{"annotation", []string{cm("annotation"), generate}, 0},
		{"annotation+label tracks by annotation", []string{cm("annotation+label"), generate}, 0},
		{"unset: Argo CD 3.x tracks by annotation", []string{cm(""), generate}, 0},
		{"no argocd-cm", []string{generate}, 0},
	} {
		fs, err := checkLabelTrackingWithCopies(context.Background(), objects(t, tt.docs...))
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != tt.want {
			t.Errorf("%s: got %+v, want %d findings", tt.name, fs, tt.want)
		}
	}
}

// TestPointerFindingsCarryThePointer: the two jsonPointers rules name the
// entry they are about in Finding.Pointer (and in the JSON output), as
// written in the Application; the other rules leave it empty.
func TestPointerFindingsCarryThePointer(t *testing.T) {
	for rule, want := range map[string]string{
		RuleArgoPointerUnescapedSlash: "/metadata/annotations/example.com/last-scan",
		RuleArgoPointerListIndex:      "/spec/template/spec/containers/0/image",
	} {
		got, err := Run(context.Background(), loadExample(t, rule, "bad.yaml"), testOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range got {
			switch {
			case f.Rule == rule && f.Pointer != want:
				t.Errorf("%s: pointer %q, want %q", rule, f.Pointer, want)
			case f.Rule != RuleArgoPointerUnescapedSlash && f.Rule != RuleArgoPointerListIndex && f.Pointer != "":
				t.Errorf("%s has a pointer: %+v", f.Rule, f)
			}
		}
		var buf bytes.Buffer
		if err := WriteJSON(&buf, findingsOf(got, rule)); err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprintf(`"pointer": %q`, want); !strings.Contains(buf.String(), w) {
			t.Errorf("%s: the JSON output has no %s:\n%s", rule, w, buf.String())
		}
	}
}
