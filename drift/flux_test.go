package drift

import (
	"fmt"
	"sync"
	"testing"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// matchingRulesPerObject is how Flux.matchingRules decided before selectors
// were cached: every selector compiled again for every object.
func matchingRulesPerObject(rules []FluxRule, obj *unstructured.Unstructured) []FluxRule {
	var out []FluxRule
	for _, r := range rules {
		sr, err := jsondiff.NewSelectorRegex(r.Selector)
		if err == nil && sr.MatchUnstructured(obj) {
			out = append(out, r)
		}
	}
	return out
}

// selectorRules covers every kind of target: none, each field, regular
// expressions, label and annotation selectors, and targets that do not
// compile (which match nothing).
func selectorRules() []FluxRule {
	r := func(name string, sel *jsondiff.Selector) FluxRule {
		return FluxRule{Name: name, IgnoreRule: jsondiff.IgnoreRule{Paths: []string{"/spec/replicas"}, Selector: sel}}
	}
	return []FluxRule{
		r("all", nil),
		r("empty", &jsondiff.Selector{}),
		r("deployments", &jsondiff.Selector{Group: "apps", Version: "v1", Kind: "Deployment"}),
		r("kind-regex", &jsondiff.Selector{Kind: "Deploy.*"}),
		r("kind-prefix-only", &jsondiff.Selector{Kind: "Deploy"}),
		r("name", &jsondiff.Selector{Name: "web"}),
		r("name-regex", &jsondiff.Selector{Name: "we.|api"}),
		r("namespace", &jsondiff.Selector{Namespace: "shop"}),
		r("other-namespace", &jsondiff.Selector{Namespace: "other"}),
		r("labels", &jsondiff.Selector{LabelSelector: "app=web,tier!=db"}),
		r("annotations", &jsondiff.Selector{AnnotationSelector: "example.com/owner in (team-a,team-b)"}),
		r("configmaps", &jsondiff.Selector{Version: "v1", Kind: "ConfigMap"}),
		r("bad-regex", &jsondiff.Selector{Name: "("}),
		r("bad-labels", &jsondiff.Selector{LabelSelector: "app in ("}),
	}
}

func selectorObjects(t testing.TB) []*unstructured.Unstructured {
	other := object(t, web)
	other.SetNamespace("other")
	other.SetName("api")
	annotated := object(t, web)
	annotated.SetNamespace("shop")
	annotated.SetAnnotations(map[string]string{"example.com/owner": "team-b"})
	return []*unstructured.Unstructured{
		object(t, web),
		other,
		annotated,
		object(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop, labels: {app: web, tier: db}}
data: {a: b}
`),
	}
}

func ruleNames(rules []FluxRule) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}

func TestFluxMatchingRules(t *testing.T) {
	rules := selectorRules()
	f := &Flux{Rules: rules}
	for _, obj := range selectorObjects(t) {
		got := ruleNames(f.matchingRules(obj))
		want := ruleNames(matchingRulesPerObject(rules, obj))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s %s/%s: matching rules %v, compiled per object %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), got, want)
		}
	}
	// The table is not vacuous: the first object is selected by some rules
	// and not by others, and broken targets select nothing.
	got := ruleNames(f.matchingRules(selectorObjects(t)[0]))
	if want := "[all empty deployments kind-regex name name-regex labels]"; fmt.Sprint(got) != want {
		t.Errorf("Deployment default/web: matching rules %v, want %s", got, want)
	}
}

func TestFluxSelectorsCompiledOnce(t *testing.T) {
	obj := object(t, web)
	f := &Flux{Rules: selectorRules()}
	f.matchingRules(obj)
	first := f.selectors.Load()
	if first == nil {
		t.Fatal("no compiled selectors after the first use")
	}
	for range 3 {
		f.matchingRules(obj)
	}
	if f.selectors.Load() != first {
		t.Error("the selectors were compiled again although the rules did not change")
	}

	// Changed rules are compiled again: an added rule...
	f.Rules = append(f.Rules, FluxRule{Name: "added", IgnoreRule: jsondiff.IgnoreRule{Selector: &jsondiff.Selector{Name: "web"}}})
	if got := ruleNames(f.matchingRules(obj)); got[len(got)-1] != "added" {
		t.Errorf("after adding a rule: matching rules %v, want the added one last", got)
	}
	second := f.selectors.Load()
	if second == first {
		t.Error("the selectors were not compiled again after a rule was added")
	}
	// ...a rule given another target...
	f.Rules[2].Selector = &jsondiff.Selector{Kind: "StatefulSet"}
	for _, name := range ruleNames(f.matchingRules(obj)) {
		if name == "deployments" {
			t.Error("a rule whose target was replaced still matches with its old target")
		}
	}
	if f.selectors.Load() == second {
		t.Error("the selectors were not compiled again after a rule's target was replaced")
	}
	// ...and no rules at all.
	f.Rules = nil
	if got := f.matchingRules(obj); len(got) != 0 {
		t.Errorf("without rules: matching rules %v", ruleNames(got))
	}
}

func TestFluxMatchingRulesConcurrent(t *testing.T) {
	rules := selectorRules()
	objs := selectorObjects(t)
	want := make([]string, len(objs))
	for i, obj := range objs {
		want[i] = fmt.Sprint(ruleNames(matchingRulesPerObject(rules, obj)))
	}
	f := &Flux{Rules: rules}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(objs))
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 50 {
				i := (g + n) % len(objs)
				if got := fmt.Sprint(ruleNames(f.matchingRules(objs[i]))); got != want[i] {
					errs <- fmt.Sprintf("object %d: %s, want %s", i, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// BenchmarkFluxMatchingRules compares matching an object against the rules
// with selectors compiled once per Flux value and compiled per object.
func BenchmarkFluxMatchingRules(b *testing.B) {
	rules := selectorRules()
	obj := object(b, web)
	b.Run("compiled-once", func(b *testing.B) {
		f := &Flux{Rules: rules}
		b.ReportAllocs()
		for b.Loop() {
			f.matchingRules(obj)
		}
	})
	b.Run("compiled-per-object", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			matchingRulesPerObject(rules, obj)
		}
	})
}
