package ignore

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func FuzzParsePointer(f *testing.F) {
	for _, s := range []string{"", "/", "/spec/replicas", "/a~0b~1c", "/a~2", "a/b", "//", "/~", "/spec/containers/-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks, err := ParsePointer(s)
		if err != nil {
			return
		}
		// A valid pointer has exactly one spelling.
		if back := FormatPointer(toks); back != s {
			t.Fatalf("FormatPointer(ParsePointer(%q)) = %q", s, back)
		}
		again, err := ParsePointer(FormatPointer(toks))
		if err != nil || !slices.Equal(again, toks) {
			t.Fatalf("round trip of %q: %q, %v", s, again, err)
		}
	})
}

func FuzzCompile(f *testing.F) {
	f.Add(true, "apps", "Deployment", "web", "/spec/replicas", "", "")
	f.Add(true, "*", "*", "", "/metadata/annotations/example.com/config-hash", `.spec.template.spec.containers[] | select(.name == "istio-proxy")`, "")
	f.Add(false, "", "Deploy.*", "", "", "", "tier=frontend")
	f.Add(false, "(", "[", "", "/a~2", ".[", "a in (")
	f.Add(true, "{a,b", "[!a-", `\`, "/spec/template/spec/containers/-1", "def f: f; f", "")
	objs := []*unstructured.Unstructured{obj(f, deploymentYAML), obj(f, serviceYAML), obj(f, configMapYAML), obj(f, liveDeploymentYAML)}
	f.Fuzz(func(t *testing.T, argo bool, group, kind, name, pointer, jq, selector string) {
		r := Rule{Tool: Flux, Target: Target{Group: group, Kind: kind, Name: name, LabelSelector: selector}, JSONPointers: []string{pointer}}
		if argo {
			r = Rule{Tool: ArgoCD, Target: Target{Group: group, Kind: kind, Name: name}, JSONPointers: []string{pointer}, ManagedFieldsManagers: []string{"kyverno"}}
			if jq != "" {
				r.JQPathExpressions = []string{jq}
			}
		}
		s, err := Compile([]Rule{r}, Options{JQTimeout: 20 * time.Millisecond})
		if err != nil {
			return
		}
		for _, o := range objs {
			c := o.DeepCopy()
			_, _ = s.Normalize(context.Background(), c)
			_ = s.IgnoredBy(o, pointer)
			_ = s.IgnoredBy(o, "/spec/replicas")
		}
		_ = s.Ineffective(objs)
	})
}
