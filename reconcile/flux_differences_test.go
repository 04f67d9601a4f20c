package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift/ignore"
)

// TestFluxDifferences pins where Flux's own implementation of drift ignore
// rules, github.com/fluxcd/pkg/ssa v0.78.0 (ResourceManager.ApplyAll with
// ApplyOptions.DriftIgnoreRules, as kustomize-controller calls it), departs
// from the semantics Flux documents for Kustomization .spec.ignore and truce
// implements: per ignored path, strip it from the payload when another Apply
// manager owns it, adopt the live value when only the sync owns it (absent
// stays absent); creation seeds Git's value; changes to ignored fields alone
// trigger nothing; a "" path leaves the object alone once it exists.
//
// Each row is one history, run twice on fresh in-process clusters: through
// truce's Reconciler, and through ssa with the same rules. truce's outcome
// must be the documented one. ssa's is what it does today: when a Flux
// upgrade fixes one of these, its row fails here; then update the table in
// docs/sync.md and the row.
func TestFluxDifferences(t *testing.T) {
	deployment := &jsondiff.Selector{Kind: "Deployment"}
	for _, row := range []struct {
		name  string
		rules []ignore.Rule
		// ssaRules are the same rules in ssa's form, written out so that
		// this side does not depend on truce's conversion (checked against
		// ignore.FluxRules below): a rule without target has a nil
		// Selector.
		ssaRules []jsondiff.IgnoreRule
		// history creates the objects and ends with the sync under test;
		// w.last is that sync's outcome.
		history     func(w *fluxWorld)
		truce, flux func(t *testing.T, w *fluxWorld)
	}{
		{
			// jsondiff.CompileIgnoreRules keys its map by *SelectorRegex and
			// NewSelectorRegex(nil) is nil: every target-less rule lands on
			// the nil key, the last one overwriting the others.
			name: "rules_without_target_only_the_last_applies",
			rules: []ignore.Rule{
				{Tool: ignore.Flux, JSONPointers: []string{"/spec/replicas"}},
				{Tool: ignore.Flux, JSONPointers: []string{"/metadata/annotations/a"}},
			},
			ssaRules: []jsondiff.IgnoreRule{
				{Paths: []string{"/spec/replicas"}},
				{Paths: []string{"/metadata/annotations/a"}},
			},
			history: func(w *fluxWorld) {
				git := deploySpec{replicas: 2, annotation: "git", containers: []string{"app=nginx:1"}}.yaml()
				w.mustSync(git)
				w.hpa("web", 5)
				w.edit("web", "kubectl-edit", func(o *unstructured.Unstructured) {
					must(w.t, unstructured.SetNestedField(o.Object, "edited", "metadata", "annotations", "a"))
				})
				w.sync(git)
			},
			truce: func(t *testing.T, w *fluxWorld) {
				// Both rules hold: nothing but ignored fields changed, so
				// nothing is written; the HPA keeps replicas (stripped) and
				// the edited annotation is adopted.
				w.expect(t, "", map[string]string{"web": "unchanged"}, "web")
				w.expectIgnored(t, map[string]string{"/spec/replicas": Strip, "/metadata/annotations/a": Adopt})
				live := w.get("web")
				expectField(t, live, int64(5), "spec", "replicas")
				expectOwners(t, live, []string{"hpa/Apply"}, "f:spec", "f:replicas")
				expectField(t, live, "edited", "metadata", "annotations", "a")
			},
			flux: func(t *testing.T, w *fluxWorld) {
				// Only the annotation rule survives: the annotation is
				// adopted, replicas is drift and reverted to Git's value,
				// taken from the HPA.
				w.expect(t, "", map[string]string{"web": "configured"})
				live := w.get("web")
				expectMoved(t, w, "web")
				expectField(t, live, int64(2), "spec", "replicas")
				expectOwners(t, live, []string{fluxManager + "/Apply"}, "f:spec", "f:replicas")
				expectField(t, live, "edited", "metadata", "annotations", "a")
			},
		},
		{
			// The dry run of Git without replicas yields the default 1, which
			// differs from live: computeDriftedPaths adopts, and
			// applyDriftResult's JSON patch "replace" needs the key in the
			// payload, which Git no longer has. The error returns from
			// ApplyAll's apply loop, so the objects after it are not applied.
			name:     "git_removes_ignored_field_only_flux_owns",
			rules:    []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/spec/replicas"}, Target: ignore.Target{Kind: "Deployment"}}},
			ssaRules: []jsondiff.IgnoreRule{{Paths: []string{"/spec/replicas"}, Selector: deployment}},
			history: func(w *fluxWorld) {
				w.mustSync(deploySpec{replicas: 2, containers: []string{"app=nginx:1"}}.yaml() + "---\n" +
					deploySpec{name: "worker", replicas: 1, containers: []string{"app=nginx:1"}}.yaml())
				w.sync(deploySpec{containers: []string{"app=nginx:2"}}.yaml() + "---\n" +
					deploySpec{name: "worker", replicas: 1, containers: []string{"app=nginx:2"}}.yaml())
			},
			truce: func(t *testing.T, w *fluxWorld) {
				// The live replicas is adopted, the image applied, and the
				// other Deployment is synced too.
				w.expect(t, "", map[string]string{"web": "configured", "worker": "configured"})
				w.expectIgnored(t, map[string]string{"/spec/replicas": Adopt})
				live := w.get("web")
				expectField(t, live, int64(2), "spec", "replicas")
				expectOwners(t, live, []string{DefaultFieldManager + "/Apply"}, "f:spec", "f:replicas")
				expectField(t, live, "nginx:2", "spec", "template", "spec", "containers", 0, "image")
				expectField(t, w.get("worker"), "nginx:2", "spec", "template", "spec", "containers", 0, "image")
			},
			flux: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "replace operation does not apply: doc is missing key: /spec/replicas", nil, "web", "worker")
				live := w.get("web")
				expectField(t, live, int64(2), "spec", "replicas")
				expectField(t, live, "nginx:1", "spec", "template", "spec", "containers", 0, "image")
				expectField(t, w.get("worker"), "nginx:1", "spec", "template", "spec", "containers", 0, "image")
			},
		},
		{
			// lookupJSONPointer reads .../containers/0/image in live (the
			// app) and in the dry run (the sidecar); the adopt is a JSON
			// patch "replace" at the same index of the Git payload, the
			// sidecar. The app container gets Git's image back.
			name:     "list_index_path_adopted_by_position",
			rules:    []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/spec/template/spec/containers/0/image"}, Target: ignore.Target{Kind: "Deployment"}}},
			ssaRules: []jsondiff.IgnoreRule{{Paths: []string{"/spec/template/spec/containers/0/image"}, Selector: deployment}},
			history: func(w *fluxWorld) {
				w.mustSync(deploySpec{replicas: 2, containers: []string{"app=nginx:1"}}.yaml())
				w.edit("web", "kubectl-edit", func(o *unstructured.Unstructured) {
					unstructuredSet(o.Object, "nginx:1-hotfix", "spec", "template", "spec", "containers", 0, "image")
				})
				w.sync(deploySpec{replicas: 2, containers: []string{"sidecar=envoy:1", "app=nginx:1"}}.yaml())
			},
			truce: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "", map[string]string{"web": "configured"})
				w.expectIgnored(t, map[string]string{"/spec/template/spec/containers/0/image": Adopt})
				live := w.get("web")
				expectField(t, live, []string{"sidecar=envoy:1", "app=nginx:1-hotfix"}, "containers")
				expectOwners(t, live, []string{"kubectl-edit/Update", DefaultFieldManager + "/Apply"}, appImage...)
			},
			flux: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "", map[string]string{"web": "configured"})
				live := w.get("web")
				expectField(t, live, []string{"sidecar=nginx:1-hotfix", "app=nginx:1"}, "containers")
				expectOwners(t, live, []string{fluxManager + "/Apply"}, appImage...)
			},
		},
		{
			// removeIgnoredFields' JSON patch "remove" of "" strips nothing,
			// so any change is drift; computeDriftedPaths then adopts the
			// whole live object (pointerToFieldsV1Segments fails on "", read
			// as "sole owner"), managedFields included, and the apply is
			// rejected.
			name:     "root_path",
			rules:    []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{""}, Target: ignore.Target{Kind: "Deployment"}}},
			ssaRules: []jsondiff.IgnoreRule{{Paths: []string{jsondiff.IgnorePathRoot}, Selector: deployment}},
			history: func(w *fluxWorld) {
				w.mustSync(deploySpec{replicas: 2, containers: []string{"app=nginx:1"}}.yaml())
				w.sync(deploySpec{replicas: 2, containers: []string{"app=nginx:2"}}.yaml())
			},
			truce: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "", map[string]string{"web": "unchanged"}, "web")
				w.expectIgnored(t, map[string]string{"": Adopt})
				expectField(t, w.get("web"), "nginx:1", "spec", "template", "spec", "containers", 0, "image")
			},
			flux: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "metadata.managedFields must be nil", nil, "web")
				expectField(t, w.get("web"), "nginx:1", "spec", "template", "spec", "containers", 0, "image")
			},
		},
		{
			// computeDriftedPaths adopts a path missing in live with value
			// nil (lookupJSONPointer's "not present"); the JSON patch
			// "replace" writes null, which the apply stores as "".
			name:     "adopt_field_absent_in_cluster",
			rules:    []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/metadata/annotations/a"}, Target: ignore.Target{Kind: "Deployment"}}},
			ssaRules: []jsondiff.IgnoreRule{{Paths: []string{"/metadata/annotations/a"}, Selector: deployment}},
			history: func(w *fluxWorld) {
				w.mustSync(deploySpec{replicas: 2, annotation: "git", containers: []string{"app=nginx:1"}}.yaml())
				w.edit("web", "kubectl-edit", func(o *unstructured.Unstructured) {
					unstructured.RemoveNestedField(o.Object, "metadata", "annotations", "a")
				})
				w.sync(deploySpec{replicas: 2, annotation: "git", containers: []string{"app=nginx:2"}}.yaml())
			},
			truce: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "", map[string]string{"web": "configured"})
				w.expectIgnored(t, map[string]string{"/metadata/annotations/a": Adopt})
				live := w.get("web")
				expectField(t, live, nil, "metadata", "annotations", "a")
				expectOwners(t, live, nil, annotationA...)
				expectField(t, live, "nginx:2", "spec", "template", "spec", "containers", 0, "image")
			},
			flux: func(t *testing.T, w *fluxWorld) {
				w.expect(t, "", map[string]string{"web": "configured"})
				live := w.get("web")
				expectField(t, live, "", "metadata", "annotations", "a")
				expectOwners(t, live, []string{fluxManager + "/Apply"}, annotationA...)
				expectField(t, live, "nginx:2", "spec", "template", "spec", "containers", 0, "image")
			},
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			// The rules truce hands to ssa-based tooling are the ones this
			// row gives ssa.
			if d := cmp.Diff(row.ssaRules, ignore.FluxRules(row.rules)); d != "" {
				t.Fatalf("ssa rules differ from ignore.FluxRules (-row +FluxRules):\n%s", d)
			}
			t.Run("truce", func(t *testing.T) {
				w := newTruceWorld(t, row.rules)
				row.history(w)
				row.truce(t, w)
			})
			t.Run("flux_ssa_v0.78.0", func(t *testing.T) {
				w := newSSAWorld(t, row.ssaRules)
				row.history(w)
				row.flux(t, w)
			})
		})
	}
}

// fluxManager is kustomize-controller's field manager.
const fluxManager = "kustomize-controller"

var (
	appImage    = []string{"f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"app"}`, "f:image"}
	annotationA = []string{"f:metadata", "f:annotations", "f:a"}
	deployGVK   = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// deploySpec renders a Deployment in namespace default (name defaults to web).
// replicas 0 leaves the field out, annotation "" leaves annotation a out;
// containers are name=image.
type deploySpec struct {
	name       string
	replicas   int
	annotation string
	containers []string
}

func (d deploySpec) yaml() string {
	if d.name == "" {
		d.name = "web"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n  namespace: default\n", d.name)
	if d.annotation != "" {
		fmt.Fprintf(&b, "  annotations: {a: %s}\n", d.annotation)
	}
	b.WriteString("spec:\n")
	if d.replicas > 0 {
		fmt.Fprintf(&b, "  replicas: %d\n", d.replicas)
	}
	fmt.Fprintf(&b, "  selector: {matchLabels: {app: %s}}\n  template:\n    metadata: {labels: {app: %s}}\n    spec:\n      containers:\n", d.name, d.name)
	for _, c := range d.containers {
		name, image, _ := strings.Cut(c, "=")
		fmt.Fprintf(&b, "      - {name: %s, image: %q}\n", name, image)
	}
	return b.String()
}

// fluxWorld is one fresh in-process cluster and one way to sync Git into
// it.
type fluxWorld struct {
	t   *testing.T
	ctx context.Context
	c   *memory.Cluster
	// apply syncs Git (YAML documents) once: the actions by object name
	// ("created", "configured", "unchanged", ...) and the error.
	apply func(git string) (map[string]string, error)
	last  struct {
		actions map[string]string
		err     error
		// ignored are, per object, the ignored fields truce reported
		// (pointer: treatment); truce only.
		ignored map[string]map[string]string
		// rv are the resourceVersions before the sync.
		rv map[string]string
	}
}

func newTruceWorld(t *testing.T, rules []ignore.Rule) *fluxWorld {
	w := &fluxWorld{t: t, ctx: context.Background(), c: newCluster(t, "")}
	opts := DefaultOptions()
	opts.Rules = rules
	src := &StaticSource{}
	r, err := New(w.c, sourceFunc{src}, &MemoryStore{}, opts)
	must(t, err)
	n := 0
	w.apply = func(git string) (map[string]string, error) {
		n++
		src.Objects, src.Revision = decode(t, git), fmt.Sprintf("main@sha1:%d", n)
		res, err := r.Reconcile(w.ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		w.last.ignored = map[string]map[string]string{}
		for _, o := range res.Objects {
			out[o.Ref.Name] = strings.ToLower(string(o.Action))
			for _, f := range o.Ignored {
				if w.last.ignored[o.Ref.Name] == nil {
					w.last.ignored[o.Ref.Name] = map[string]string{}
				}
				w.last.ignored[o.Ref.Name][f.Pointer] = f.Treatment
			}
		}
		if len(res.Errors) > 0 {
			return out, errors.New(strings.Join(res.Errors, "; "))
		}
		return out, nil
	}
	return w
}

func newSSAWorld(t *testing.T, rules []jsondiff.IgnoreRule) *fluxWorld {
	w := &fluxWorld{t: t, ctx: context.Background(), c: newCluster(t, "")}
	rm := ssa.NewResourceManager(cluster.ControllerClient(w.c), nil,
		ssa.Owner{Field: fluxManager, Group: "kustomize.toolkit.fluxcd.io"})
	w.apply = func(git string) (map[string]string, error) {
		opts := ssa.DefaultApplyOptions()
		opts.DriftIgnoreRules = rules
		cs, err := rm.ApplyAll(w.ctx, unstructuredOf(decode(t, git)), opts)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, e := range cs.Entries {
			out[e.ObjMetadata.Name] = string(e.Action)
		}
		return out, nil
	}
	return w
}

// sync applies Git and records the outcome in w.last.
func (w *fluxWorld) sync(git string) {
	w.t.Helper()
	w.last.rv, w.last.ignored = map[string]string{}, nil
	objs, err := w.c.List(w.ctx, deployGVK, "default")
	must(w.t, err)
	for _, o := range objs {
		w.last.rv[o.GetName()] = o.GetResourceVersion()
	}
	w.last.actions, w.last.err = w.apply(git)
}

// mustSync syncs Git and fails the test on an error.
func (w *fluxWorld) mustSync(git string) {
	w.t.Helper()
	w.sync(git)
	if w.last.err != nil {
		w.t.Fatalf("sync: %v", w.last.err)
	}
}

func (w *fluxWorld) get(name string) *unstructured.Unstructured {
	w.t.Helper()
	o, err := w.c.Get(w.ctx, cluster.Ref{GroupVersionKind: deployGVK, Namespace: "default", Name: name})
	must(w.t, err)
	return o
}

// hpa sets replicas as an autoscaler does: an Apply manager of its own.
func (w *fluxWorld) hpa(name string, replicas int64) {
	w.t.Helper()
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"replicas": replicas},
	}}
	_, err := w.c.Apply(w.ctx, o, cluster.ApplyOptions{FieldManager: "hpa", Force: true})
	must(w.t, err)
}

// edit changes the live object with an update, as kubectl edit does.
func (w *fluxWorld) edit(name, manager string, fn func(*unstructured.Unstructured)) {
	w.t.Helper()
	o := w.get(name)
	fn(o)
	_, err := w.c.Update(w.ctx, o, cluster.WriteOptions{FieldManager: manager})
	must(w.t, err)
}

// expect checks the last sync: its error contains wantErr ("" for none),
// its actions are want (nil: not checked), and the named objects kept their
// resourceVersion.
func (w *fluxWorld) expect(t *testing.T, wantErr string, want map[string]string, untouched ...string) {
	t.Helper()
	switch err := w.last.err; {
	case wantErr == "" && err != nil:
		t.Errorf("sync failed: %v", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Errorf("sync error = %v, want one containing %q", err, wantErr)
	}
	if want != nil {
		if d := cmp.Diff(want, w.last.actions); d != "" {
			t.Errorf("actions (-want +got):\n%s", d)
		}
	}
	for _, name := range untouched {
		if got := w.get(name).GetResourceVersion(); got != w.last.rv[name] {
			t.Errorf("%s: resourceVersion %s -> %s, want no write", name, w.last.rv[name], got)
		}
	}
}

// expectIgnored checks the ignored fields truce reported for web in the
// last sync (pointer: treatment).
func (w *fluxWorld) expectIgnored(t *testing.T, want map[string]string) {
	t.Helper()
	if d := cmp.Diff(want, w.last.ignored["web"]); d != "" {
		t.Errorf("ignored fields of web (-want +got):\n%s", d)
	}
}

// expectMoved checks that the last sync wrote the named object.
func expectMoved(t *testing.T, w *fluxWorld, name string) {
	t.Helper()
	if got := w.get(name).GetResourceVersion(); got == w.last.rv[name] {
		t.Errorf("%s: resourceVersion stayed %s, want a write", name, got)
	}
}

// expectField checks the value at path (map keys and list indexes); want
// nil means absent. The path "containers" lists the containers as
// name=image.
func expectField(t *testing.T, o *unstructured.Unstructured, want any, path ...any) {
	t.Helper()
	var got any
	found := true
	if len(path) == 1 && path[0] == "containers" {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		var out []string
		for _, c := range cs {
			m := c.(map[string]any)
			out = append(out, fmt.Sprintf("%v=%v", m["name"], m["image"]))
		}
		got = out
	} else {
		var cur any = o.Object
		for _, p := range path {
			switch k := p.(type) {
			case string:
				m, _ := cur.(map[string]any)
				cur, found = m[k]
			case int:
				l, _ := cur.([]any)
				found = k < len(l)
				if found {
					cur = l[k]
				}
			}
			if !found {
				break
			}
		}
		if found {
			got = cur
		}
	}
	if want == nil && found {
		t.Errorf("%v = %#v, want absent", path, got)
		return
	}
	if want != nil && !cmp.Equal(want, got) {
		t.Errorf("%v = %#v, want %#v", path, got, want)
	}
}

// expectOwners checks the managers ("manager/Operation", sorted) whose
// managedFields hold the fieldsV1 path.
func expectOwners(t *testing.T, o *unstructured.Unstructured, want []string, fieldsV1 ...string) {
	t.Helper()
	var got []string
	for _, mf := range o.GetManagedFields() {
		var cur map[string]any
		if mf.FieldsV1 == nil || json.Unmarshal(mf.FieldsV1.GetRawBytes(), &cur) != nil {
			continue
		}
		owns := true
		for _, s := range fieldsV1 {
			next, ok := cur[s]
			if !ok {
				owns = false
				break
			}
			cur, _ = next.(map[string]any)
		}
		if owns {
			got = append(got, mf.Manager+"/"+string(mf.Operation))
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(want, got) {
		t.Errorf("owners of %v = %v, want %v", fieldsV1, got, want)
	}
}
