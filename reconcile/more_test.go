package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
)

// fight makes an Update manager set the ConfigMap's mode, as a controller
// that keeps its own value would.
func fight(t *testing.T, c cluster.Cluster, value string) {
	t.Helper()
	ctx := context.Background()
	live, err := c.Get(ctx, cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"})
	must(t, err)
	live.Object["data"] = map[string]any{"mode": value}
	_, err = c.Update(ctx, live, cluster.WriteOptions{FieldManager: "config-operator"})
	must(t, err)
}

// contestConfig runs passes against a fighting operator until the mode is
// contested.
func contestConfig(t *testing.T, r *Reconciler, c cluster.Cluster) *Result {
	t.Helper()
	runPass(t, r)
	for i := 0; i < 5; i++ {
		fight(t, c, "green")
		res := runPass(t, r)
		if len(res.Contested) > 0 {
			return res
		}
	}
	t.Fatal("never contested")
	return nil
}

func TestContestNamesTheFieldManagerAndSurvivesARestart(t *testing.T) {
	c := newCluster(t, shopNamespace)
	store := &MemoryStore{}
	src := &StaticSource{Revision: "main@sha1:1", Objects: decode(t, config)}
	r, err := New(c, sourceFunc{src}, store, DefaultOptions())
	must(t, err)
	res := contestConfig(t, r, c)
	con := res.Contested[0]
	if con.Pointer != "/data/mode" || con.Writer.Manager != "config-operator" || con.Writer.Operation != "Update" || con.Fix.Kind != "ignore-rule" {
		t.Fatalf("contest: %+v", con)
	}
	if con.Changes != 3 || con.Git != "blue" || con.Live != "green" {
		t.Fatalf("contest: %+v", con)
	}
	// A new process with the same store keeps the contest.
	r2, err := New(c, sourceFunc{src}, store, DefaultOptions())
	must(t, err)
	res = runPass(t, r2)
	if res.Writes != 0 || len(res.Contested) != 1 {
		t.Fatalf("after restart: writes %d contested %+v", res.Writes, res.Contested)
	}
	// Git moves on: the contest is lifted and Git's value written again.
	src.Revision = "main@sha1:2"
	res = runPass(t, r2)
	if len(res.Contested) != 0 || res.Writes != 1 {
		t.Fatalf("after a Git change: writes %d contested %+v", res.Writes, res.Contested)
	}
}

func TestLoopBreakerOff(t *testing.T) {
	c := newCluster(t, shopNamespace)
	opts := DefaultOptions()
	opts.Loop.Threshold = 0
	r, _ := newReconciler(t, c, config, opts)
	runPass(t, r)
	for i := 0; i < 5; i++ {
		fight(t, c, "green")
		if res := runPass(t, r); res.Writes != 1 || len(res.Contested) != 0 {
			t.Fatalf("pass %d: writes %d contested %v", i, res.Writes, res.Contested)
		}
	}
}

func TestWindowForgetsOldChanges(t *testing.T) {
	c := newCluster(t, shopNamespace)
	clock := newClock()
	r, _ := newReconciler(t, c, config, DefaultOptions(), WithClock(clock.now))
	runPass(t, r)
	for i := 0; i < 6; i++ {
		fight(t, c, "green")
		clock.add(31 * 60e9) // two changes never fall in one hour
		if res := runPass(t, r); len(res.Contested) != 0 {
			t.Fatalf("pass %d contested %+v", i, res.Contested)
		}
	}
}

func TestConflictWithoutForceIsReported(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, shopNamespace)
	opts := DefaultOptions()
	opts.Force = false
	r, _ := newReconciler(t, c, config, opts)
	runPass(t, r)
	other := decode(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: red}
`)[0].Object
	_, err := c.Apply(ctx, other, cluster.ApplyOptions{FieldManager: "other", Force: true})
	must(t, err)
	res := runPass(t, r)
	if actions(res)["ConfigMap/settings"] != Failed || !strings.Contains(strings.Join(res.Errors, "\n"), "conflict") {
		t.Fatalf("%+v %v", res.Objects, res.Errors)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	c := newCluster(t, "")
	opts := DefaultOptions()
	opts.DryRun = true
	store := &MemoryStore{}
	src := &StaticSource{Revision: "r1", Objects: decode(t, shopNamespace+"---"+config)}
	r, err := New(c, src, store, opts)
	must(t, err)
	res := runPass(t, r)
	if res.Writes != 0 || res.Count(Created) != 2 || !res.Drifted() || store.Last() != nil {
		t.Fatalf("writes %d %v", res.Writes, actions(res))
	}
	if _, err := c.Get(context.Background(), cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"}); err == nil {
		t.Fatal("a dry run created the ConfigMap")
	}
}

func TestCRDsGoFirst(t *testing.T) {
	c := newCluster(t, "")
	r, _ := newReconciler(t, c, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: shop}
spec: {size: 3}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
---`+shopNamespace, DefaultOptions())
	res := runPass(t, r)
	if !res.Synced() || res.Count(Created) != 3 {
		t.Fatalf("%v %v", actions(res), res.Errors)
	}
	if res := runPass(t, r); res.Writes != 0 {
		t.Fatalf("second pass writes %d %v", res.Writes, res.Errors)
	}
}

func TestDuplicateObjectsAreAnError(t *testing.T) {
	c := newCluster(t, "")
	r, _ := newReconciler(t, c, config+"---"+config, DefaultOptions())
	_, err := r.Reconcile(context.Background())
	if err == nil || !strings.Contains(err.Error(), "git.yaml:") {
		t.Fatalf("err %v", err)
	}
}

func TestAnotherSyncsObjectIsNotTaken(t *testing.T) {
	c := newCluster(t, shopNamespace)
	a, _ := newReconciler(t, c, config, DefaultOptions())
	runPass(t, a)
	opts := DefaultOptions()
	opts.Name = "other"
	b, _ := newReconciler(t, c, config, opts)
	res := runPass(t, b)
	if actions(res)["ConfigMap/settings"] != Failed || !strings.Contains(res.Objects[0].Error, "another sync") {
		t.Fatalf("%+v", res.Objects)
	}
}

func TestArgoStyleRules(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, shopNamespace)
	opts := DefaultOptions()
	opts.Rules = []ignore.Rule{
		{Tool: ignore.ArgoCD, Target: ignore.Target{Group: "apps", Kind: "Deployment"}, JQPathExpressions: []string{".spec.template.spec.containers[].image"}},
		{Tool: ignore.ArgoCD, Target: ignore.Target{Kind: "ConfigMap"}, ManagedFieldsManagers: []string{"config-operator"}},
	}
	r, _ := newReconciler(t, c, web+"---"+config, opts)
	runPass(t, r)
	live, err := c.Get(ctx, webRef)
	must(t, err)
	unstructuredSet(live.Object, "nginx:9", "spec", "template", "spec", "containers", 0, "image")
	_, err = c.Update(ctx, live, cluster.WriteOptions{FieldManager: "kubectl-edit"})
	must(t, err)
	fight(t, c, "green")
	res := runPass(t, r)
	if res.Writes != 0 {
		t.Fatalf("writes %d %+v", res.Writes, res.Objects)
	}
	for _, o := range res.Objects {
		if len(o.Ignored) != 1 || o.Ignored[0].Treatment != Adopt {
			t.Fatalf("%s ignored %+v", o.Ref, o.Ignored)
		}
	}
}

func TestBackoff(t *testing.T) {
	b := DefaultBackoff()
	want := []string{"2s", "6s", "18s", "54s", "2m42s", "5m0s", "5m0s"}
	for i, w := range want {
		if got := b.Delay(i).String(); got != w {
			t.Errorf("delay %d = %s, want %s", i, got, w)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"no name":      func(o *Options) { o.Name = "" },
		"drift":        func(o *Options) { o.Drift = "psychic" },
		"window":       func(o *Options) { o.Loop.Window = 0 },
		"backoff":      func(o *Options) { o.Backoff.Factor = 0.5 },
		"concurrency":  func(o *Options) { o.Concurrency = 0 },
		"offline only": func(o *Options) { o.Drift = DriftOffline },
		"empty person": func(o *Options) { o.Loop.HumanFieldManagers = []string{"k9s", ""} },
	} {
		o := DefaultOptions()
		mutate(&o)
		if _, err := New(newCluster(t, ""), StaticSource{}, &MemoryStore{}, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A contest saved on a writer that is now a person's (an upgrade from a
// version that contested people, or --human-field-manager naming it) is
// lifted: people's edits are reverted, never contested.
func TestSavedContestOnAPersonIsLifted(t *testing.T) {
	c := newCluster(t, shopNamespace)
	store := &MemoryStore{}
	src := &StaticSource{Revision: "main@sha1:1", Objects: decode(t, config)}
	r, err := New(c, sourceFunc{src}, store, DefaultOptions())
	must(t, err)
	if res := contestConfig(t, r, c); len(res.Contested) != 1 {
		t.Fatalf("contested: %+v", res.Contested)
	}
	opts := DefaultOptions()
	opts.Loop.HumanFieldManagers = []string{"config-operator"}
	r2, err := New(c, sourceFunc{src}, store, opts)
	must(t, err)
	res := runPass(t, r2)
	if len(res.Contested) != 0 || res.Writes != 1 {
		t.Fatalf("after naming the manager a person's: writes %d contested %+v", res.Writes, res.Contested)
	}
}

// TestObjectErrorsOncePerCause: an error many objects share is stated
// once, with the count and the first object; others keep "REF: ERROR".
func TestObjectErrorsOncePerCause(t *testing.T) {
	ref := func(name string) cluster.Ref {
		return cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: name}
	}
	const down = "not applied: namespaces and CRDs failed first"
	got := objectErrors([]ObjectResult{
		{Ref: ref("ns"), Action: Failed, Error: "connection refused"},
		{Ref: ref("a"), Action: Skipped, Error: down},
		{Ref: ref("ok"), Action: Configured},
		{Ref: ref("b"), Action: Skipped, Error: down},
		{Ref: ref("c"), Action: Skipped, Error: down},
	})
	want := []string{
		"ConfigMap/shop/ns: connection refused",
		down + " (3 objects, first ConfigMap/shop/a)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
