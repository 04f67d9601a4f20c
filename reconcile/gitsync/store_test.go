package gitsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
)

// fakeServer answers the GitSync requests of a fake dynamic client the way
// kube-apiserver does for a single field manager: an apply to the resource
// creates the object or replaces its spec (bumping the generation when it
// changes) and leaves the status alone; an apply to the status subresource
// replaces the status and leaves the spec alone. client-go's own fake
// tracker merges applies with a strategic merge patch instead, which keeps
// fields an apply leaves out, and does not create.
type fakeServer struct {
	t    *testing.T
	mu   sync.Mutex
	obj  *unstructured.Unstructured
	fail map[string]error // by verb, or "patch/status"
}

func newFake(t *testing.T) (*fakeServer, *fakedynamic.FakeDynamicClient) {
	srv := &fakeServer{t: t, fail: map[string]error{}}
	client := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{GVR: "GitSyncList"})
	client.PrependReactor("*", "gitsyncs", srv.react)
	return srv, client
}

func (s *fakeServer) react(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := action.GetVerb()
	if action.GetSubresource() != "" {
		key += "/" + action.GetSubresource()
	}
	if err := s.fail[key]; err != nil {
		return true, nil, err
	}
	gr := GVR.GroupResource()
	// Switch on the verb: a PatchAction is also a GetAction (both have a name).
	switch action.GetVerb() {
	case "get":
		a := action.(clienttesting.GetAction)
		if s.obj == nil || s.obj.GetName() != a.GetName() {
			return true, nil, apierrors.NewNotFound(gr, a.GetName())
		}
		return true, s.obj.DeepCopy(), nil
	case "list":
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(GVK.GroupVersion().String())
		list.SetKind("GitSyncList")
		if s.obj != nil {
			list.Items = append(list.Items, *s.obj.DeepCopy())
		}
		return true, list, nil
	case "patch":
		a := action.(clienttesting.PatchActionImpl)
		if a.GetPatchType() != types.ApplyPatchType {
			s.t.Errorf("%s: patch type %s, want a server-side apply", key, a.GetPatchType())
		}
		opts := a.PatchOptions
		if opts.FieldManager != "truce" || opts.Force == nil || !*opts.Force {
			s.t.Errorf("%s: field manager %q, force %v; want truce, forced", key, opts.FieldManager, opts.Force)
		}
		patch := map[string]any{}
		if err := json.Unmarshal(a.GetPatch(), &patch); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		applied := &unstructured.Unstructured{Object: patch}
		if applied.GetName() != a.GetName() || applied.GetNamespace() != a.GetNamespace() || applied.GroupVersionKind() != GVK {
			s.t.Errorf("%s: body names %s %s/%s, request %s/%s", key, applied.GroupVersionKind(), applied.GetNamespace(), applied.GetName(), a.GetNamespace(), a.GetName())
		}
		if a.GetSubresource() == "status" {
			if s.obj == nil {
				return true, nil, apierrors.NewNotFound(gr, a.GetName())
			}
			if _, ok := patch["spec"]; ok {
				s.t.Errorf("the status apply carries a spec")
			}
			s.obj.Object["status"] = patch["status"]
			return true, s.obj.DeepCopy(), nil
		}
		if _, ok := patch["status"]; ok {
			s.t.Errorf("the spec apply carries a status")
		}
		if s.obj == nil {
			s.obj = applied.DeepCopy()
			delete(s.obj.Object, "status")
			s.obj.SetGeneration(1)
			s.obj.SetUID("uid-1")
			return true, s.obj.DeepCopy(), nil
		}
		if !equalJSON(s.obj.Object["spec"], patch["spec"]) {
			s.obj.Object["spec"] = patch["spec"]
			s.obj.SetGeneration(s.obj.GetGeneration() + 1)
		}
		return true, s.obj.DeepCopy(), nil
	}
	return true, nil, fmt.Errorf("unexpected %s", key)
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

var (
	deployment = cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web"}
	namespace  = cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "shop"}
	crd        = cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, Name: "widgets.example.com"}
	since      = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
)

func testSpec() Spec {
	opts := reconcile.DefaultOptions()
	opts.Prune = true
	opts.Rules = []ignore.Rule{{Tool: ignore.Flux, Source: "ks.yaml:1", Field: "spec.ignore[0]", JSONPointers: []string{"/spec/replicas"},
		Target: ignore.Target{Kind: "Deployment", Name: "web"}}}
	return SpecFor(manifest.GitSource{URL: "https://example.com/fleet.git", Ref: "main", Path: "apps/shop"}, opts, time.Minute, nil)
}

func contest(ref cluster.Ref, ptr string, w reconcile.Writer, git, live any) reconcile.Contest {
	return reconcile.Contest{Ref: ref, Source: "shop@0123456:web.yaml:1", Pointer: ptr, Writer: w, Git: git, Live: live,
		Changes: 3, Since: since, Fix: reconcile.Fix{Kind: "ignore-rule", Description: "ignore " + ptr},
		Revision: "main@sha1:1", Admission: "abc", Effect: "e1"}
}

func TestStateRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name  string
		state reconcile.State
	}{
		{"empty", reconcile.State{}},
		{"inventory in apply order", reconcile.State{Inventory: []cluster.Ref{namespace, crd, deployment}}},
		{"contested by a field manager and by admission", reconcile.State{
			Inventory: []cluster.Ref{deployment},
			Contested: []reconcile.Contest{
				contest(deployment, "/spec/replicas", reconcile.Writer{Manager: "hpa", Operation: "Update"}, int64(3), int64(5)),
				contest(deployment, "/spec/template/spec/containers/0/image", reconcile.Writer{Admission: "MutatingAdmissionPolicy/mirror (binding mirror)"},
					"nginx:1.27", map[string]any{"nested": []any{int64(1), 1.5, "x", true, nil}}),
			},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, client := newFake(t)
			store := NewStore(client, "truce-system", "app", testSpec())
			ctx := context.Background()
			got, err := store.Load(ctx)
			if err != nil || len(got.Inventory)+len(got.Contested) != 0 {
				t.Fatalf("before the first save: %+v, %v", got, err)
			}
			st := &reconcile.Status{Source: "fleet", Revision: "main@sha1:1", AppliedRevision: "main@sha1:1", LastSync: since,
				Contested: tt.state.Contested, State: tt.state}
			if err := store.Save(ctx, st); err != nil {
				t.Fatal(err)
			}
			got, err = store.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.state, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("loaded state (-saved +loaded):\n%s", diff)
			}
		})
	}
}

func TestSaveWritesSpecAndStatus(t *testing.T) {
	srv, client := newFake(t)
	store := NewStore(client, "truce-system", "app", testSpec())
	ctx := context.Background()
	st := &reconcile.Status{Source: "https://example.com/fleet.git//apps/shop?ref=main", Revision: "main@sha1:1", AppliedRevision: "main@sha1:1",
		LastSync: since, Applied: 2, Unchanged: 1, Pruned: 1,
		State: reconcile.State{Inventory: []cluster.Ref{namespace, deployment}}}
	if err := store.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	obj := srv.obj
	str := func(path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
		return fmt.Sprint(v)
	}
	for path, want := range map[string]string{
		"spec.source.url":              "https://example.com/fleet.git",
		"spec.source.ref":              "main",
		"spec.source.path":             "apps/shop",
		"spec.interval":                "1m0s",
		"spec.prune":                   "true",
		"spec.force":                   "true",
		"spec.drift":                   "server",
		"spec.loop.threshold":          "3",
		"spec.loop.window":             "1h0m0s",
		"spec.loop.humanFieldManagers": "[kubectl]",
		"spec.backoff.initial":         "2s",
		"spec.backoff.factor":          "3",
		"spec.backoff.max":             "5m0s",
		"status.observedGeneration":    "1",
		"status.lastAttemptedRevision": "main@sha1:1",
		"status.lastAppliedRevision":   "main@sha1:1",
		"status.lastSyncTime":          "2026-11-30T12:00:00Z",
		"status.counts.applied":        "2",
		"status.counts.unchanged":      "1",
		"status.counts.pruned":         "1",
		"status.counts.failed":         "0",
		"status.counts.contested":      "0",
		"status.manualEdits.reverted":  "0",
	} {
		if got := str(strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ignore")
	if want := []any{map[string]any{"paths": []any{"/spec/replicas"}, "target": map[string]any{"kind": "Deployment", "name": "web"},
		"tool": "Flux", "source": "ks.yaml:1: spec.ignore[0]"}}; !cmp.Equal(rules, want) {
		t.Errorf("spec.ignore = %v, want %v", rules, want)
	}
	entries, _, _ := unstructured.NestedSlice(obj.Object, "status", "inventory", "entries")
	if want := []any{map[string]any{"id": "_shop__Namespace", "v": "v1"}, map[string]any{"id": "shop_web_apps_Deployment", "v": "v1"}}; !cmp.Equal(entries, want) {
		t.Errorf("inventory = %v, want %v", entries, want)
	}

	// The same spec again is no new generation; another one is.
	if err := store.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	if obj.GetGeneration() != 1 {
		t.Errorf("generation %d after the same spec", obj.GetGeneration())
	}
	spec := testSpec()
	spec.Prune = false
	if err := NewStore(client, "truce-system", "app", spec).Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	// (The fake decodes the body with encoding/json: numbers are float64.)
	if g, _, _ := unstructured.NestedFieldNoCopy(srv.obj.Object, "status", "observedGeneration"); srv.obj.GetGeneration() != 2 || g != 2.0 {
		t.Errorf("generation %d, observedGeneration %v; want 2 and 2", srv.obj.GetGeneration(), g)
	}
}

func TestConditions(t *testing.T) {
	hpa := contest(deployment, "/spec/replicas", reconcile.Writer{Manager: "hpa", Operation: "Update"}, int64(3), int64(5))
	for _, tt := range []struct {
		name                            string
		status                          reconcile.Status
		ready, readyReason              metav1.ConditionStatus
		contested                       metav1.ConditionStatus
		contestedReason                 string
		readyMessage, contestedMessage  string
		lastApplied                     string
		wantContestedCount, wantApplied int
	}{
		{
			name:   "synced",
			status: reconcile.Status{Revision: "main@sha1:2", AppliedRevision: "main@sha1:2", Applied: 1, Unchanged: 2},
			ready:  metav1.ConditionTrue, readyReason: ReasonSynced, contested: metav1.ConditionFalse, contestedReason: ReasonNoContest,
			readyMessage: "Applied revision main@sha1:2: 1 applied, 2 unchanged, 0 pruned", lastApplied: "main@sha1:2", wantApplied: 1,
		},
		{
			name: "contested",
			status: reconcile.Status{Revision: "main@sha1:2", AppliedRevision: "main@sha1:2", Unchanged: 3,
				Contested: []reconcile.Contest{hpa}, State: reconcile.State{Contested: []reconcile.Contest{hpa}}},
			ready: metav1.ConditionFalse, readyReason: ReasonContested, contested: metav1.ConditionTrue, contestedReason: ReasonContested,
			readyMessage:     "1 field contested at main@sha1:2; truce stopped writing it",
			contestedMessage: "Deployment.apps/shop/web /spec/replicas: field manager hpa (Update) (3 changes); fix: ignore-rule",
			lastApplied:      "main@sha1:2", wantContestedCount: 1,
		},
		{
			name:   "failed objects keep the last applied revision",
			status: reconcile.Status{Revision: "main@sha1:2", Failed: 1, Errors: []string{"Deployment.apps/shop/web: applying: forbidden"}},
			ready:  metav1.ConditionFalse, readyReason: ReasonFailed, contested: metav1.ConditionFalse, contestedReason: ReasonNoContest,
			readyMessage: "1 error at main@sha1:2: Deployment.apps/shop/web: applying: forbidden", lastApplied: "main@sha1:1",
		},
		{
			name: "errors come before contests",
			status: reconcile.Status{Revision: "main@sha1:2", Errors: []string{"a", "b"},
				Contested: []reconcile.Contest{hpa}, State: reconcile.State{Contested: []reconcile.Contest{hpa}}},
			ready: metav1.ConditionFalse, readyReason: ReasonFailed, contested: metav1.ConditionTrue, contestedReason: ReasonContested,
			readyMessage: "2 errors at main@sha1:2: a; b", lastApplied: "main@sha1:1", wantContestedCount: 1,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prev := &Status{LastAppliedRevision: "main@sha1:1"}
			st := NewStatus(&tt.status, prev, 4)
			ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
			contested := meta.FindStatusCondition(st.Conditions, ConditionContested)
			if ready == nil || contested == nil {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			if ready.Status != tt.ready || ready.Reason != string(tt.readyReason) || ready.Message != tt.readyMessage || ready.ObservedGeneration != 4 {
				t.Errorf("Ready = %s %s %q (generation %d), want %s %s %q", ready.Status, ready.Reason, ready.Message, ready.ObservedGeneration,
					tt.ready, tt.readyReason, tt.readyMessage)
			}
			if contested.Status != tt.contested || contested.Reason != tt.contestedReason {
				t.Errorf("Contested = %s %s, want %s %s", contested.Status, contested.Reason, tt.contested, tt.contestedReason)
			}
			if tt.contestedMessage != "" && contested.Message != tt.contestedMessage {
				t.Errorf("Contested message %q, want %q", contested.Message, tt.contestedMessage)
			}
			if st.LastAppliedRevision != tt.lastApplied || st.LastAttemptedRevision != "main@sha1:2" {
				t.Errorf("last applied %q, attempted %q; want %q, main@sha1:2", st.LastAppliedRevision, st.LastAttemptedRevision, tt.lastApplied)
			}
			if st.Counts.Contested != tt.wantContestedCount || st.Counts.Applied != tt.wantApplied || len(st.Contested) != tt.wantContestedCount {
				t.Errorf("counts %+v, %d contested entries", st.Counts, len(st.Contested))
			}
		})
	}
}

// A condition keeps its transition time while its status holds and gets a
// new one when it changes.
func TestConditionTransitions(t *testing.T) {
	old := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	prev := &Status{Conditions: []metav1.Condition{
		{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSynced, Message: "Applied revision main@sha1:1: ...", LastTransitionTime: old},
		{Type: ConditionContested, Status: metav1.ConditionFalse, Reason: ReasonNoContest, Message: "no field is contested", LastTransitionTime: old},
		{Type: "Custom", Status: metav1.ConditionTrue, Reason: "Other", LastTransitionTime: old},
	}}
	synced := NewStatus(&reconcile.Status{Revision: "main@sha1:2", AppliedRevision: "main@sha1:2"}, prev, 1)
	if r := meta.FindStatusCondition(synced.Conditions, ConditionReady); !r.LastTransitionTime.Equal(&old) || !strings.Contains(r.Message, "main@sha1:2") {
		t.Errorf("Ready still True: %+v", r)
	}
	if meta.FindStatusCondition(synced.Conditions, "Custom") == nil {
		t.Error("another writer's condition was dropped")
	}
	failed := NewStatus(&reconcile.Status{Revision: "main@sha1:2", Errors: []string{"x"}}, prev, 1)
	if r := meta.FindStatusCondition(failed.Conditions, ConditionReady); r.LastTransitionTime.Equal(&old) {
		t.Errorf("Ready turned False but kept its transition time: %+v", r)
	}
	if c := meta.FindStatusCondition(failed.Conditions, ConditionContested); !c.LastTransitionTime.Equal(&old) {
		t.Errorf("Contested still False: %+v", c)
	}
}

func TestRecordFailureKeepsTheState(t *testing.T) {
	srv, client := newFake(t)
	store := NewStore(client, "truce-system", "app", testSpec())
	ctx := context.Background()
	hpa := contest(deployment, "/spec/replicas", reconcile.Writer{Manager: "hpa", Operation: "Update"}, int64(3), int64(5))
	state := reconcile.State{Inventory: []cluster.Ref{namespace, deployment}, Contested: []reconcile.Contest{hpa}}
	if err := store.Save(ctx, &reconcile.Status{Revision: "main@sha1:1", AppliedRevision: "main@sha1:1", LastSync: since, State: state}); err != nil {
		t.Fatal(err)
	}
	before, _, _ := unstructured.NestedMap(srv.obj.Object, "status")
	if err := store.RecordFailure(ctx, errors.New("fetching https://example.com/fleet.git: connection refused")); err != nil {
		t.Fatal(err)
	}
	after, _, _ := unstructured.NestedMap(srv.obj.Object, "status")
	var conds []metav1.Condition
	if err := fromValue(after["conditions"], &conds); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(conds, ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonError || !strings.Contains(ready.Message, "connection refused") {
		t.Errorf("Ready after a failed pass: %+v", ready)
	}
	if c := meta.FindStatusCondition(conds, ConditionContested); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Contested after a failed pass: %+v", c)
	}
	delete(before, "conditions")
	delete(after, "conditions")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the rest of the status changed (-before +after):\n%s", diff)
	}
	got, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&state, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("state after a failed pass (-want +got):\n%s", diff)
	}

	// A failure before any pass creates the object with the failure.
	srv2, client2 := newFake(t)
	if err := NewStore(client2, "truce-system", "app", testSpec()).RecordFailure(ctx, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if msg, _, _ := unstructured.NestedSlice(srv2.obj.Object, "status", "conditions"); len(msg) != 1 {
		t.Errorf("conditions %v", msg)
	}
}

func TestErrorsAreWrapped(t *testing.T) {
	forbidden := apierrors.NewForbidden(GVR.GroupResource(), "app", errors.New("RBAC"))
	missing := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource"}}
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		fail     map[string]error
		run      func(*Store) error
		want     string
		is       func(error) bool
		notFound bool
	}{
		{"load", map[string]error{"get": forbidden}, func(s *Store) error { _, err := s.Load(ctx); return err },
			"reading GitSync truce-system/app: ", apierrors.IsForbidden, false},
		{"spec", map[string]error{"patch": forbidden}, func(s *Store) error { return s.Save(ctx, &reconcile.Status{}) },
			"applying the spec of GitSync truce-system/app: ", apierrors.IsForbidden, false},
		{"status", map[string]error{"patch/status": forbidden}, func(s *Store) error { return s.Save(ctx, &reconcile.Status{}) },
			"writing the status of GitSync truce-system/app: ", apierrors.IsForbidden, false},
		{"failure", map[string]error{"patch/status": forbidden}, func(s *Store) error { return s.RecordFailure(ctx, errors.New("x")) },
			"writing the status of GitSync truce-system/app: ", apierrors.IsForbidden, false},
		{"CRD missing on save", map[string]error{"patch": missing}, func(s *Store) error { return s.Save(ctx, &reconcile.Status{}) },
			"applying the spec of GitSync truce-system/app: the GitSync CRD (gitsyncs.truce.dev) is not installed", apierrors.IsNotFound, true},
		{"CRD missing at start", map[string]error{"list": missing}, func(s *Store) error { return s.Check(ctx) },
			"the GitSync CRD (gitsyncs.truce.dev) is not installed: kubectl apply -f deploy/sync/crd.yaml", nil, true},
		{"check", map[string]error{"list": forbidden}, func(s *Store) error { return s.Check(ctx) },
			"listing GitSyncs in truce-system: ", apierrors.IsForbidden, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, client := newFake(t)
			srv.fail = tt.fail
			err := tt.run(NewStore(client, "truce-system", "app", testSpec()))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to start with %q", err, tt.want)
			}
			if tt.is != nil && !tt.is(err) {
				t.Errorf("%v does not wrap the API error", err)
			}
			if errors.Is(err, ErrNotInstalled) != tt.notFound {
				t.Errorf("errors.Is(%v, ErrNotInstalled) = %v", err, !tt.notFound)
			}
		})
	}
	t.Run("a corrupt inventory is an error, not an empty one", func(t *testing.T) {
		srv, client := newFake(t)
		store := NewStore(client, "truce-system", "app", testSpec())
		if err := store.Save(ctx, &reconcile.Status{State: reconcile.State{Inventory: []cluster.Ref{deployment}}}); err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedSlice(srv.obj.Object, []any{map[string]any{"id": "web", "v": "v1"}}, "status", "inventory", "entries")
		if _, err := store.Load(ctx); err == nil || !strings.Contains(err.Error(), `inventory entry 0: "web"`) {
			t.Errorf("error %v", err)
		}
	})
}

func TestInventoryEntries(t *testing.T) {
	for _, ref := range []cluster.Ref{namespace, crd, deployment,
		{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "kube-system", Name: "a.b-c"}} {
		e := InventoryEntryOf(ref)
		back, err := ParseInventoryEntry(e)
		if err != nil || back != ref {
			t.Errorf("%s: %+v → %v, %v", ref, e, back, err)
		}
	}
	for _, e := range []InventoryEntry{{ID: "a_b_c", Version: "v1"}, {ID: "ns_name_apps_Deployment"}, {ID: "ns__apps_Deployment", Version: "v1"}} {
		if _, err := ParseInventoryEntry(e); err == nil {
			t.Errorf("%+v parsed", e)
		}
	}
}

func TestSaveInventoryKeepsTheRest(t *testing.T) {
	srv, client := newFake(t)
	store := NewStore(client, "truce-system", "app", testSpec())
	ctx := context.Background()
	hpa := contest(deployment, "/spec/replicas", reconcile.Writer{Manager: "hpa", Operation: "Update"}, int64(3), int64(5))
	state := reconcile.State{Inventory: []cluster.Ref{namespace}, Contested: []reconcile.Contest{hpa}}
	if err := store.Save(ctx, &reconcile.Status{Revision: "main@sha1:1", AppliedRevision: "main@sha1:1", LastSync: since, State: state}); err != nil {
		t.Fatal(err)
	}
	before, _, _ := unstructured.NestedMap(srv.obj.Object, "status")
	if err := store.SaveInventory(ctx, []cluster.Ref{namespace, deployment}); err != nil {
		t.Fatal(err)
	}
	after, _, _ := unstructured.NestedMap(srv.obj.Object, "status")
	delete(before, "inventory")
	delete(after, "inventory")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the rest of the status changed (-before +after):\n%s", diff)
	}
	got, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state.Inventory = []cluster.Ref{namespace, deployment}
	if diff := cmp.Diff(&state, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("state after SaveInventory (-want +got):\n%s", diff)
	}

	// Before any pass, the object is created with the inventory alone.
	_, client2 := newFake(t)
	store2 := NewStore(client2, "truce-system", "app", testSpec())
	if err := store2.SaveInventory(ctx, []cluster.Ref{deployment}); err != nil {
		t.Fatal(err)
	}
	if got, err := store2.Load(ctx); err != nil || len(got.Inventory) != 1 || got.Inventory[0] != deployment {
		t.Errorf("Load after SaveInventory on a new object = %+v, %v", got, err)
	}
}

// The people's edits truce wrote back add up across passes and restarts
// (a new store reads the count from the status), with the last one shown;
// a failed pass keeps them.
func TestManualEditsAddUp(t *testing.T) {
	srv, client := newFake(t)
	ctx := context.Background()
	edit := func(ptr, manager, op string, git, live any) reconcile.ManualEdit {
		return reconcile.ManualEdit{Ref: deployment, Pointer: ptr, Writer: reconcile.Writer{Manager: manager, Operation: op}, Git: git, Live: live}
	}
	pass := func(store *Store, at time.Time, edits ...reconcile.ManualEdit) ManualEdits {
		t.Helper()
		st := &reconcile.Status{Source: "fleet", Revision: "main@sha1:1", AppliedRevision: "main@sha1:1", LastSync: at, Reverted: edits,
			State: reconcile.State{Inventory: []cluster.Ref{deployment}}}
		if err := store.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		got, err := statusOf(srv.obj)
		if err != nil {
			t.Fatal(err)
		}
		return got.ManualEdits
	}
	store := NewStore(client, "truce-system", "app", testSpec())
	if got := pass(store, since); got.Reverted != 0 || got.Last != nil {
		t.Fatalf("no edits: %+v", got)
	}
	got := pass(store, since.Add(time.Minute), edit("/spec/replicas", "kubectl", "Update scale", int64(3), int64(7)),
		edit("/metadata/labels/tier", "kubectl-label", "Update", "web", "canary"))
	want := ManualEdits{Reverted: 2, Last: &ManualEdit{Object: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Field: "/metadata/labels/tier", Writer: Writer{Manager: "kubectl-label", Operation: "Update"}, Git: "web", Live: "canary",
		Time: metav1.NewTime(since.Add(time.Minute))}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("two edits (-want +got):\n%s", diff)
	}
	if got := pass(store, since.Add(2*time.Minute)); !cmp.Equal(got, want) {
		t.Fatalf("a pass without edits changed them: %+v", got)
	}
	if err := store.RecordFailure(ctx, errors.New("git unreachable")); err != nil {
		t.Fatal(err)
	}
	restarted := NewStore(client, "truce-system", "app", testSpec())
	got = pass(restarted, since.Add(3*time.Minute), edit("/spec/replicas", "k9s", "Update", int64(3), int64(1)))
	if got.Reverted != 3 || got.Last == nil || got.Last.Writer.Manager != "k9s" || got.Last.Live != int64(1) {
		t.Fatalf("after a failure and a restart: %+v", got)
	}
}
