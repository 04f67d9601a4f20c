package ignore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMatching(t *testing.T) {
	deploy, svc, cm := obj(t, deploymentYAML), obj(t, serviceYAML), obj(t, configMapYAML)
	all := []*unstructured.Unstructured{deploy, svc, cm}
	tests := []struct {
		name string
		rule Rule
		want []string // kinds matched
	}{
		{"flux no target is every resource", Rule{Tool: Flux}, []string{"Deployment", "Service", "ConfigMap"}},
		{"flux kind is anchored", Rule{Tool: Flux, Target: Target{Kind: "Deploy"}}, nil},
		{"flux kind regex", Rule{Tool: Flux, Target: Target{Kind: "Deploy.*"}}, []string{"Deployment"}},
		{"flux kind alternation is anchored as a whole", Rule{Tool: Flux, Target: Target{Kind: "Service|ConfigMap"}}, []string{"Service", "ConfigMap"}},
		{"flux empty group is any group", Rule{Tool: Flux, Target: Target{Name: "web"}}, []string{"Deployment", "Service"}},
		{"flux group regex", Rule{Tool: Flux, Target: Target{Group: "apps"}}, []string{"Deployment"}},
		{"flux version", Rule{Tool: Flux, Target: Target{Version: "v1"}}, []string{"Deployment", "Service", "ConfigMap"}},
		{"flux namespace anchored", Rule{Tool: Flux, Target: Target{Namespace: "sho"}}, nil},
		{"flux label selector", Rule{Tool: Flux, Target: Target{LabelSelector: "tier in (frontend)"}}, []string{"Deployment"}},
		{"flux label selector absent label", Rule{Tool: Flux, Target: Target{LabelSelector: "!tier"}}, []string{"Service"}},
		{"flux annotation selector", Rule{Tool: Flux, Target: Target{AnnotationSelector: "team=payments"}}, []string{"Deployment"}},
		{"argo glob all", Rule{Tool: ArgoCD, Target: Target{Group: "*", Kind: "*"}}, []string{"Deployment", "Service", "ConfigMap"}},
		{"argo empty group is core", Rule{Tool: ArgoCD, Target: Target{Kind: "*"}}, []string{"Service", "ConfigMap"}},
		{"argo group and kind", Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}}, []string{"Deployment"}},
		{"argo kind is not a prefix", Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deploy"}}, nil},
		{"argo kind glob", Rule{Tool: ArgoCD, Target: Target{Group: "*", Kind: "Deploy*"}}, []string{"Deployment"}},
		{"argo name exact", Rule{Tool: ArgoCD, Target: Target{Group: "*", Kind: "*", Name: "web"}}, []string{"Deployment", "Service"}},
		{"argo name is not a regex", Rule{Tool: ArgoCD, Target: Target{Group: "*", Kind: "*", Name: "we.*"}}, nil},
		{"argo namespace exact", Rule{Tool: ArgoCD, Target: Target{Group: "*", Kind: "*", Namespace: "other"}}, []string{"ConfigMap"}},
		{"argo empty kind matches nothing", Rule{Tool: ArgoCD, Target: Target{Group: "*"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rule.JSONPointers = []string{"/spec"}
			s := mustCompile(t, tt.rule)
			var got []string
			for _, o := range all {
				if len(s.Matching(o)) == 1 {
					got = append(got, o.GetKind())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("matched %v, want %v", got, tt.want)
			}
			// Flux's own library is the oracle for Flux targets.
			if tt.rule.Tool == Flux {
				oracle, err := jsondiff.CompileIgnoreRules(FluxRules([]Rule{tt.rule}))
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range all {
					for sr := range oracle {
						if sr.MatchUnstructured(o) != (len(s.Matching(o)) == 1) {
							t.Errorf("%s: Flux says %v", o.GetKind(), sr.MatchUnstructured(o))
						}
					}
				}
			}
		})
	}
}

func TestFluxRules(t *testing.T) {
	got := FluxRules([]Rule{
		{Tool: Flux, JSONPointers: []string{"/spec/replicas"}, Target: Target{Kind: "Deployment", Name: "podinfo"}},
		{Tool: ArgoCD, JSONPointers: []string{"/spec"}},
		{Tool: Flux, JSONPointers: []string{""}},
	})
	want := []jsondiff.IgnoreRule{
		{Paths: []string{"/spec/replicas"}, Selector: &jsondiff.Selector{Kind: "Deployment", Name: "podinfo"}},
		{Paths: []string{""}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("FluxRules (-want +got):\n%s", diff)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		want string
	}{
		{"pointer without slash", Rule{Tool: ArgoCD, Source: "app.yaml:3", Field: "spec.ignoreDifferences[0]", Target: Target{Kind: "*"}, JSONPointers: []string{"spec/replicas"}},
			`app.yaml:3: spec.ignoreDifferences[0]: jsonPointers[0]: JSON pointer "spec/replicas" must start with "/"`},
		{"argo root pointer", Rule{Tool: ArgoCD, Target: Target{Kind: "*"}, JSONPointers: []string{""}}, `must start with "/"`},
		{"bad escape", Rule{Tool: Flux, JSONPointers: []string{"/a~2"}}, `paths[0]: JSON pointer "/a~2"`},
		{"jq parse", Rule{Tool: ArgoCD, Source: "a.yaml:1", Target: Target{Kind: "*"}, JQPathExpressions: []string{".spec["}},
			`a.yaml:1: jqPathExpressions[0] ".spec["`},
		{"jq that only parses wrapped", Rule{Tool: ArgoCD, Target: Target{Kind: "*"}, JQPathExpressions: []string{".a), (.b"}}, `jqPathExpressions[0]`},
		{"flux regex", Rule{Tool: Flux, Source: "k.yaml:7", Target: Target{Kind: "Deploy("}}, `k.yaml:7: target: invalid kind regex`},
		{"flux label selector", Rule{Tool: Flux, Target: Target{LabelSelector: "a in ("}}, `invalid label selector`},
		{"flux jq", Rule{Tool: Flux, JQPathExpressions: []string{".a"}}, `Flux ignore rules only have paths`},
		{"argo version", Rule{Tool: ArgoCD, Target: Target{Kind: "*", Version: "v1"}}, `not supported by Argo CD`},
		{"argo glob", Rule{Tool: ArgoCD, Target: Target{Kind: "[abc"}}, `kind: glob "[abc"`},
		{"tool", Rule{Tool: "Spinnaker"}, `unknown tool "Spinnaker"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]Rule{tt.rule}, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func pointers(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Pointer)
	}
	return out
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name    string
		rule    Rule
		in      string
		want    map[string]any // nested field -> expected (nil: absent)
		matches []string
	}{
		{
			name:    "argo jsonPointer removes the field",
			rule:    Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, JSONPointers: []string{"/spec/replicas"}},
			in:      deploymentYAML,
			want:    map[string]any{"spec.replicas": nil},
			matches: []string{"/spec/replicas"},
		},
		{
			name:    "argo missing path is skipped silently",
			rule:    Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, JSONPointers: []string{"/spec/paused", "/spec/nothing/here", "/spec/replicas"}},
			in:      deploymentYAML,
			want:    map[string]any{"spec.replicas": nil},
			matches: []string{"/spec/replicas"},
		},
		{
			name:    "argo escaped key",
			rule:    Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, JSONPointers: []string{"/metadata/annotations/example.com~1config-hash"}},
			in:      deploymentYAML,
			want:    map[string]any{"metadata.annotations.team": "payments"},
			matches: []string{"/metadata/annotations/example.com~1config-hash"},
		},
		{
			name: "argo removes maps left empty",
			rule: Rule{Tool: ArgoCD, Target: Target{Kind: "ConfigMap"}, JSONPointers: []string{"/data/key"}},
			in:   configMapYAML,
			// data became {} and Argo CD's removeEmptyObjects drops it.
			want:    map[string]any{"data": nil},
			matches: []string{"/data/key"},
		},
		{
			name: "argo jq deletes a list item by content",
			rule: Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"},
				JQPathExpressions: []string{`.spec.template.spec.containers[] | select(.name == "istio-proxy")`}},
			in:      deploymentYAML,
			want:    map[string]any{"spec.template.spec.containers": []any{map[string]any{"name": "web", "image": "nginx:1.27"}}},
			matches: []string{"/spec/template/spec/containers/1"},
		},
		{
			name: "argo jq field of every item",
			rule: Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"},
				JQPathExpressions: []string{`.spec.template.spec.containers[].image`}},
			in: deploymentYAML,
			want: map[string]any{"spec.template.spec.containers": []any{
				map[string]any{"name": "web"}, map[string]any{"name": "istio-proxy"}}},
			matches: []string{"/spec/template/spec/containers/0/image", "/spec/template/spec/containers/1/image"},
		},
		{
			name: "argo jq negative index reported as the concrete item",
			rule: Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"},
				JQPathExpressions: []string{`.spec.template.spec.containers[-1].image`}},
			in: deploymentYAML,
			want: map[string]any{"spec.template.spec.containers": []any{
				map[string]any{"name": "web", "image": "nginx:1.27"}, map[string]any{"name": "istio-proxy"}}},
			matches: []string{"/spec/template/spec/containers/1/image"},
		},
		{
			name: "argo jq that fails is skipped",
			rule: Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"},
				JQPathExpressions: []string{`.spec.template.spec.initContainers[] | select(.name == "x")`}},
			in:   deploymentYAML,
			want: map[string]any{"spec.replicas": int64(2)},
		},
		{
			name: "argo rule for another kind leaves the object alone",
			rule: Rule{Tool: ArgoCD, Target: Target{Kind: "Service"}, JSONPointers: []string{"/spec"}},
			in:   deploymentYAML,
			want: map[string]any{"spec.replicas": int64(2)},
		},
		{
			name:    "flux path removed, missing path tolerated",
			rule:    Rule{Tool: Flux, Target: Target{Kind: "Deployment"}, JSONPointers: []string{"/spec/replicas", "/spec/missing"}},
			in:      deploymentYAML,
			want:    map[string]any{"spec.replicas": nil, "spec.selector.matchLabels.app": "web"},
			matches: []string{"/spec/replicas"},
		},
		{
			name:    "flux root path excludes the resource and changes nothing",
			rule:    Rule{Tool: Flux, JSONPointers: []string{""}},
			in:      serviceYAML,
			want:    map[string]any{"spec.clusterIP": "10.0.0.1"},
			matches: []string{""},
		},
		{
			name:    "flux negative index counts from the end",
			rule:    Rule{Tool: Flux, JSONPointers: []string{"/spec/template/spec/containers/-1"}},
			in:      deploymentYAML,
			want:    map[string]any{"spec.template.spec.containers": []any{map[string]any{"name": "web", "image": "nginx:1.27"}}},
			matches: []string{"/spec/template/spec/containers/1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.rule)
			o := obj(t, tt.in)
			ms, err := s.Normalize(context.Background(), o)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if diff := cmp.Diff(tt.matches, pointers(ms)); diff != "" {
				t.Errorf("matches (-want +got):\n%s", diff)
			}
			for _, m := range ms {
				if m.Rule == nil || m.Rule.Tool != tt.rule.Tool {
					t.Errorf("match %q has rule %+v", m.Pointer, m.Rule)
				}
			}
			for path, want := range tt.want {
				got, found, _ := unstructured.NestedFieldNoCopy(o.Object, strings.Split(path, ".")...)
				if want == nil {
					if found {
						t.Errorf("%s = %v, want it removed", path, got)
					}
					continue
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", path, diff)
				}
			}
		})
	}
}

func TestNormalizeJQTimeout(t *testing.T) {
	rules := []Rule{
		{Tool: ArgoCD, Source: "app.yaml:1", Field: "spec.ignoreDifferences[0]", Target: Target{Group: "apps", Kind: "Deployment"},
			JQPathExpressions: []string{`.spec | until(false; .)`}},
		{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, JSONPointers: []string{"/spec/replicas"}},
	}
	s, err := Compile(rules, Options{JQTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o := obj(t, deploymentYAML)
	start := time.Now()
	ms, err := s.Normalize(context.Background(), o)
	if !errors.Is(err, ErrJQTimeout) {
		t.Fatalf("Normalize error = %v, want ErrJQTimeout", err)
	}
	if !strings.Contains(err.Error(), "app.yaml:1: spec.ignoreDifferences[0]: jqPathExpressions[0]") {
		t.Errorf("error %q does not name the rule", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Normalize took %v", d)
	}
	// The other rule still applied, as in Argo CD.
	if _, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); found {
		t.Error("spec.replicas not removed")
	}
	if diff := cmp.Diff([]string{"/spec/replicas"}, pointers(ms)); diff != "" {
		t.Errorf("matches (-want +got):\n%s", diff)
	}
}

func TestNormalizeDefaultTimeout(t *testing.T) {
	s := mustCompile(t, Rule{Tool: ArgoCD, Target: Target{Kind: "*"}})
	if s.jqTimeout != DefaultJQTimeout || DefaultJQTimeout != time.Second {
		t.Fatalf("default jq timeout = %v", s.jqTimeout)
	}
}

func TestNormalizeNil(t *testing.T) {
	s := mustCompile(t)
	if _, err := s.Normalize(context.Background(), nil); err == nil {
		t.Fatal("want error for nil object")
	}
}
