//go:build e2e

package sync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/gitsync"
)

// gitSyncCRDTimeout bounds the wait for the GitSync CRD to be served.
const gitSyncCRDTimeout = 60 * time.Second

// installGitSyncCRD applies the GitSync CRD (gitsync.CRDYAML, the file
// deploy/sync/crd.yaml: truce sync does not install it, its Check asks the
// user to apply it) with server-side apply, which is idempotent for the
// cases that run at the same time, and waits until the server serves
// GitSyncs in namespace. The CRD stays installed: other cases may use it.
func installGitSyncCRD(e *env, namespace string) {
	e.t.Helper()
	crd, err := gitsync.CRD()
	must(e.t, err)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	_, err = e.srv.Dynamic().Resource(crdGVR).Apply(e.ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: "truce-e2e", Force: true})
	must(e.t, err)
	store := gitsync.NewStore(e.srv.Dynamic(), namespace, "crd-probe", gitsync.Spec{})
	e.poll(gitSyncCRDTimeout, "GitSyncs served", func(ctx context.Context) (bool, error) {
		return true, store.Check(ctx)
	})
}

// gitSyncObject reads the GitSync namespace/name as kubectl get -o yaml
// shows it, and its status decoded.
func (e *env) gitSyncObject(namespace, name string) (*unstructured.Unstructured, *gitsync.Status) {
	e.t.Helper()
	obj, err := e.srv.Dynamic().Resource(gitsync.GVR).Namespace(namespace).Get(e.ctx, name, metav1.GetOptions{})
	must(e.t, err)
	raw, err := json.Marshal(obj.Object["status"])
	must(e.t, err)
	st := &gitsync.Status{}
	if err := json.Unmarshal(raw, st); err != nil {
		e.t.Fatalf("the status of GitSync %s/%s does not decode: %v\n%s", namespace, name, err, raw)
	}
	return obj, st
}

// inventoryIDs are the inventory's entries as "id@v".
func inventoryIDs(st *gitsync.Status) []string {
	if st.Inventory == nil {
		return nil
	}
	out := make([]string, len(st.Inventory.Entries))
	for i, e := range st.Inventory.Entries {
		out[i] = e.ID + "@" + e.Version
	}
	return out
}

// checkReady checks the Ready condition: status and reason, a message
// holding want, observed at the object's generation.
func checkReady(t *testing.T, obj *unstructured.Unstructured, st *gitsync.Status, status metav1.ConditionStatus, reason, want string) {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, gitsync.ConditionReady)
	if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, want) ||
		c.ObservedGeneration != obj.GetGeneration() || c.LastTransitionTime.IsZero() {
		t.Fatalf("Ready: want %s, reason %s, a message with %q, observedGeneration %d: %+v", status, reason, want, obj.GetGeneration(), c)
	}
	if st.ObservedGeneration != obj.GetGeneration() {
		t.Fatalf("status.observedGeneration %d, generation %d", st.ObservedGeneration, obj.GetGeneration())
	}
}

// flakySource is a source whose Fetch fails while err is set (the Git
// server unreachable).
type flakySource struct {
	s   *reconcile.StaticSource
	err error
}

func (f *flakySource) Fetch(ctx context.Context) (*reconcile.Snapshot, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.s.Fetch(ctx)
}
func (f *flakySource) String() string { return f.s.String() }

// TestGitSyncStatus: passes with the GitSync store (reconcile/gitsync) on
// the real server, checked as kubectl shows the GitSync: revisions,
// counts, inventory, Ready (True after a clean pass, False with reason
// Failed after a pass with a rejected object, Contested while a field is
// left to another writer, Error after a pass that could not run),
// observedGeneration, the contested field; and that the state survives a
// restart (a new Reconciler and a new store): a contest stays in force,
// and prune deletes an object applied before the restart because the
// inventory was kept in the status. Printer columns through the server's
// Table and kubectl.
func TestGitSyncStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "gitsync", true)
	installGitSyncCRD(e, e.ns)
	opts := e.options()
	opts.Prune = true
	git := manifest.GitSource{URL: "https://example.com/fleet.git", Ref: "main", Path: "apps"}
	src := &flakySource{s: &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.decode(pruneSettings + "---" + pruneKeep)}}
	newSync := func(interval time.Duration) *reconcile.Reconciler {
		t.Helper()
		// Each process has its own client: nothing is shared but the server.
		store, err := gitsync.NewStoreForConfig(e.srv.RESTConfig(), e.ns, "sync", gitsync.SpecFor(git, opts, interval, nil))
		must(t, err)
		must(t, store.Check(e.ctx))
		r, err := reconcile.New(e.live, src, store, opts)
		must(t, err)
		return r
	}
	read := func() (*unstructured.Unstructured, *gitsync.Status) { return e.gitSyncObject(e.ns, "sync") }
	settingsID := e.ns + "_settings__ConfigMap@v1"
	keepID := e.ns + "_keep__ConfigMap@v1"

	// A clean pass.
	r := newSync(0)
	res := e.pass(r)
	if !res.Synced() || res.Count(reconcile.Created) != 2 {
		t.Fatalf("first pass: want 2 Created: %s", describe(res))
	}
	obj, st := read()
	if url, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "url"); url != git.URL {
		t.Errorf("spec.source.url %q", url)
	}
	if prune, _, _ := unstructured.NestedBool(obj.Object, "spec", "prune"); !prune {
		t.Errorf("spec.prune is not true: %v", obj.Object["spec"])
	}
	if st.LastAttemptedRevision != "main@sha1:1" || st.LastAppliedRevision != "main@sha1:1" || st.Source != "static main@sha1:1" || st.LastSyncTime == nil {
		t.Errorf("first pass: status %+v", st)
	}
	if want := (gitsync.Counts{Applied: 2}); st.Counts != want {
		t.Errorf("first pass: counts %+v, want %+v", st.Counts, want)
	}
	if got, want := inventoryIDs(st), []string{settingsID, keepID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("first pass: inventory %v, want %v", got, want)
	}
	if obj.GetGeneration() != 1 {
		t.Errorf("generation %d after the first pass", obj.GetGeneration())
	}
	checkReady(t, obj, st, metav1.ConditionTrue, gitsync.ReasonSynced, "Applied revision main@sha1:1: 2 applied, 0 unchanged, 0 pruned")
	if c := meta.FindStatusCondition(st.Conditions, gitsync.ConditionContested); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Contested after a clean pass: %+v", c)
	}

	// A pass with an object the server rejects.
	src.s.Objects, src.s.Revision = e.decode(pruneSettings+"---"+pruneKeep+`---
apiVersion: v1
kind: ConfigMap
metadata: {name: bad, namespace: NS}
data: {"not a key": x}
`), "main@sha1:2"
	res = e.pass(r)
	if res.Synced() || res.Count(reconcile.Failed) != 1 || res.Count(reconcile.Unchanged) != 2 {
		t.Fatalf("second pass: want bad Failed and 2 Unchanged: %s", describe(res))
	}
	obj, st = read()
	if st.LastAttemptedRevision != "main@sha1:2" || st.LastAppliedRevision != "main@sha1:1" {
		t.Errorf("after a failed pass: attempted %q, applied %q", st.LastAttemptedRevision, st.LastAppliedRevision)
	}
	if want := (gitsync.Counts{Unchanged: 2, Failed: 1}); st.Counts != want {
		t.Errorf("after a failed pass: counts %+v, want %+v", st.Counts, want)
	}
	if inv := strings.Join(inventoryIDs(st), " "); !strings.Contains(inv, settingsID) || !strings.Contains(inv, keepID) {
		t.Errorf("after a failed pass: inventory %v lost what was applied", inv)
	}
	checkReady(t, obj, st, metav1.ConditionFalse, gitsync.ReasonFailed, "1 error at main@sha1:2: ConfigMap/"+e.ns+"/bad: ")

	// Another writer keeps changing keep's data.mode: the third change
	// makes it Contested.
	src.s.Objects, src.s.Revision = e.decode(pruneSettings+"---"+pruneKeep), "main@sha1:3"
	cms := e.srv.Clientset().CoreV1().ConfigMaps(e.ns)
	for i := 1; i <= reconcile.DefaultLoopOptions().Threshold; i++ {
		cm, err := cms.Get(e.ctx, "keep", metav1.GetOptions{})
		must(t, err)
		cm.Data["mode"] = "red"
		_, err = cms.Update(e.ctx, cm, metav1.UpdateOptions{FieldManager: "editor"})
		must(t, err)
		res = e.pass(r)
		want := reconcile.Configured
		if i == reconcile.DefaultLoopOptions().Threshold {
			want = reconcile.Unchanged
		}
		if o := object(res, "ConfigMap", "keep"); o == nil || o.Action != want || res.Count(reconcile.Failed) != 0 {
			t.Fatalf("change %d: want keep %s: %s", i, want, describe(res))
		}
	}
	if len(res.Contested) != 1 {
		t.Fatalf("want data.mode contested: %s", describe(res))
	}
	obj, st = read()
	checkReady(t, obj, st, metav1.ConditionFalse, gitsync.ReasonContested, "1 field contested at main@sha1:3")
	if c := meta.FindStatusCondition(st.Conditions, gitsync.ConditionContested); c == nil || c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "/data/mode: field manager editor (Update)") {
		t.Fatalf("Contested: %+v", c)
	}
	checkContest := func(when string, st *gitsync.Status) {
		t.Helper()
		if st.Counts.Contested != 1 || len(st.Contested) != 1 {
			t.Fatalf("%s: counts %+v, contested %+v", when, st.Counts, st.Contested)
		}
		c := st.Contested[0]
		want := gitsync.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: e.ns, Name: "keep"}
		if c.Object != want || c.Field != "/data/mode" || c.Writer != (gitsync.Writer{Manager: "editor", Operation: "Update"}) ||
			c.Git != "green" || c.Live != "red" || c.Changes != 3 || c.Revision != "main@sha1:3" || c.Fix.Kind != string(fix.KindIgnoreRule) || c.Since.IsZero() {
			t.Fatalf("%s: contested %+v", when, c)
		}
	}
	checkContest("contested", st)

	// Restart: a new store and a new Reconciler, with another interval in
	// the spec (a new generation). The contest is still in force.
	r = newSync(time.Minute)
	res = e.pass(r)
	if res.Writes != 0 || len(res.Contested) != 1 || res.Count(reconcile.Unchanged) != 2 {
		t.Fatalf("after the restart: want the contest kept and nothing written: %s", describe(res))
	}
	if mode := e.get(configMapGVK, e.ns, "keep").Object["data"].(map[string]any)["mode"]; mode != "red" {
		t.Fatalf("after the restart truce wrote the contested field: mode %v", mode)
	}
	obj, st = read()
	if obj.GetGeneration() != 2 {
		t.Fatalf("generation %d after the spec changed", obj.GetGeneration())
	}
	if interval, _, _ := unstructured.NestedString(obj.Object, "spec", "interval"); interval != "1m0s" {
		t.Errorf("spec.interval %q", interval)
	}
	checkReady(t, obj, st, metav1.ConditionFalse, gitsync.ReasonContested, "1 field contested at main@sha1:3")
	checkContest("after the restart", st)
	if got, want := inventoryIDs(st), []string{settingsID, keepID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the restart: inventory %v, want %v", got, want)
	}

	// Restart again; Git drops settings: the inventory the first process
	// kept in the status prunes it, and the new revision lifts the contest.
	r = newSync(time.Minute)
	src.s.Objects, src.s.Revision = e.decode(pruneKeep), "main@sha1:4"
	res = e.pass(r)
	if !res.Synced() || len(res.Pruned) != 1 || res.Pruned[0].Name != "settings" || res.Count(reconcile.Configured) != 1 {
		t.Fatalf("after the second restart: want settings pruned and keep's mode written again: %s", describe(res))
	}
	if e.get(configMapGVK, e.ns, "settings") != nil {
		t.Fatal("settings left Git and is still there")
	}
	if mode := e.get(configMapGVK, e.ns, "keep").Object["data"].(map[string]any)["mode"]; mode != "green" {
		t.Fatalf("keep's mode %v after the contest was lifted", mode)
	}
	obj, st = read()
	checkReady(t, obj, st, metav1.ConditionTrue, gitsync.ReasonSynced, "Applied revision main@sha1:4: 1 applied, 0 unchanged, 1 pruned")
	if want := (gitsync.Counts{Applied: 1, Pruned: 1}); st.Counts != want || len(st.Contested) != 0 || st.LastAppliedRevision != "main@sha1:4" {
		t.Errorf("after the prune: counts %+v (want %+v), contested %+v, applied revision %q", st.Counts, want, st.Contested, st.LastAppliedRevision)
	}
	if got := inventoryIDs(st); fmt.Sprint(got) != fmt.Sprint([]string{keepID}) {
		t.Errorf("after the prune: inventory %v", got)
	}
	e.checkGitSyncColumns(e.ns, "sync", map[string]string{
		"Name": "sync", "Ready": "True", "Revision": "main@sha1:4", "Applied": "1", "Pruned": "1", "Contested": "0", "Reverted": "0",
		"Status": "Applied revision main@sha1:4: 1 applied, 0 unchanged, 1 pruned",
	})

	// A pass that cannot run (the source unreachable), recorded as the
	// CLI and the controller do: Ready False with reason Error, the rest
	// kept.
	src.err = errors.New("fetching https://example.com/fleet.git: connection refused")
	if res, err := e.tryPass(r); err == nil {
		t.Fatalf("a pass without its source did not fail: %s", describe(res))
	} else {
		store, serr := gitsync.NewStoreForConfig(e.srv.RESTConfig(), e.ns, "sync", gitsync.SpecFor(git, opts, time.Minute, nil))
		must(t, serr)
		must(t, store.RecordFailure(e.ctx, err))
	}
	before := st
	obj, st = read()
	checkReady(t, obj, st, metav1.ConditionFalse, gitsync.ReasonError, "connection refused")
	if st.Counts != before.Counts || st.LastAppliedRevision != "main@sha1:4" || fmt.Sprint(inventoryIDs(st)) != fmt.Sprint(inventoryIDs(before)) {
		t.Errorf("a failed pass changed the status: %+v, was %+v", st, before)
	}
}

// checkGitSyncColumns reads the GitSync as a Table (as kubectl get does)
// and checks the printer columns named in want; then, if kubectl is
// installed, that kubectl get -o wide shows the same.
func (e *env) checkGitSyncColumns(namespace, name string, want map[string]string) {
	e.t.Helper()
	raw, err := e.srv.Clientset().CoreV1().RESTClient().Get().
		AbsPath("/apis", gitsync.GVR.Group, gitsync.GVR.Version, "namespaces", namespace, gitsync.GVR.Resource, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(e.ctx)
	must(e.t, err)
	var table metav1.Table
	must(e.t, json.Unmarshal(raw, &table))
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		e.t.Fatalf("Table: %s", raw)
	}
	var names []string
	cells := map[string]string{}
	for i, col := range table.ColumnDefinitions {
		names = append(names, col.Name)
		cells[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	if got := strings.Join(names, " "); got != "Name Ready Revision Applied Pruned Contested Reverted Age Status" {
		e.t.Errorf("Table columns %s", got)
	}
	for col, v := range want {
		if cells[col] != v {
			e.t.Errorf("Table column %s: %q, want %q", col, cells[col], v)
		}
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		e.t.Log("kubectl not installed: kubectl get gitsync not checked")
		return
	}
	kubeconfig := filepath.Join(e.t.TempDir(), "kubeconfig")
	must(e.t, e.srv.WriteKubeconfig(kubeconfig))
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "--cache-dir", e.t.TempDir(),
		"get", "gitsync", name, "-n", namespace, "-o", "wide")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			e.t.Fatalf("kubectl get gitsync: %v\n%s\n%s", err, out, ee.Stderr)
		}
		e.t.Fatalf("kubectl get gitsync: %v", err)
	}
	e.t.Logf("kubectl get gitsync -o wide:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		e.t.Fatalf("kubectl get gitsync -o wide:\n%s", out)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	if strings.Join(head, " ") != "NAME READY REVISION APPLIED PRUNED CONTESTED REVERTED AGE STATUS" || len(row) < 8 {
		e.t.Fatalf("kubectl get gitsync -o wide:\n%s", out)
	}
	for i, col := range []string{"Name", "Ready", "Revision", "Applied", "Pruned", "Contested", "Reverted"} {
		if row[i] != want[col] {
			e.t.Errorf("kubectl column %s: %q, want %q\n%s", strings.ToUpper(col), row[i], want[col], out)
		}
	}
	if status := strings.Join(row[8:], " "); status != want["Status"] {
		e.t.Errorf("kubectl column STATUS: %q, want %q\n%s", status, want["Status"], out)
	}
}

// TestGitSyncInItsOwnNamespace: the GitSync lives in a namespace the
// sync itself creates (a repository that bootstraps its own namespace, as
// flux-system does). The first pass creates the namespace and then keeps
// the state in the GitSync there; the next process prunes by it.
// (The inventory is then saved once the first stage created the
// namespace.)
func TestGitSyncInItsOwnNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "gitsync-own", false)
	installGitSyncCRD(e, e.ns)
	opts := e.options()
	opts.Prune = true
	git := manifest.GitSource{URL: "https://example.com/fleet.git"}
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.decode(pruneNamespace + "---" + pruneSettings + "---" + pruneKeep)}
	newSync := func() *reconcile.Reconciler {
		t.Helper()
		store, err := gitsync.NewStoreForConfig(e.srv.RESTConfig(), e.ns, "sync", gitsync.SpecFor(git, opts, 0, nil))
		must(t, err)
		must(t, store.Check(e.ctx))
		r, err := reconcile.New(e.live, source{src}, store, opts)
		must(t, err)
		return r
	}
	res, err := e.tryPass(newSync())
	if err != nil || !res.Synced() || res.Count(reconcile.Created) != 3 {
		t.Fatalf("first pass: want the Namespace and 2 ConfigMaps Created: err %v: %s", err, describe(res))
	}
	obj, st := e.gitSyncObject(e.ns, "sync")
	checkReady(t, obj, st, metav1.ConditionTrue, gitsync.ReasonSynced, "Applied revision main@sha1:1: 3 applied")
	if got, want := inventoryIDs(st), []string{"_" + e.ns + "__Namespace@v1", e.ns + "_settings__ConfigMap@v1", e.ns + "_keep__ConfigMap@v1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("inventory %v, want %v", got, want)
	}

	src.Objects, src.Revision = e.decode(pruneNamespace+"---"+pruneKeep), "main@sha1:2"
	res = e.pass(newSync())
	if !res.Synced() || len(res.Pruned) != 1 || res.Pruned[0] != (cluster.Ref{GroupVersionKind: configMapGVK, Namespace: e.ns, Name: "settings"}) {
		t.Fatalf("second process: want settings pruned: %s", describe(res))
	}
	if ns, err := e.srv.Clientset().CoreV1().Namespaces().Get(e.ctx, e.ns, metav1.GetOptions{}); err != nil || ns.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("the namespace of the GitSync: %v, %v", ns, err)
	}
}
