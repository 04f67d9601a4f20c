package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
)

// recordingStore is a MemoryStore that notes, at each SaveInventory, the
// inventory and how many objects the cluster held then.
type recordingStore struct {
	MemoryStore
	c     cluster.Cluster
	saves []string
	fail  error
}

func (s *recordingStore) SaveInventory(ctx context.Context, inv []cluster.Ref) error {
	if s.fail != nil {
		return s.fail
	}
	var names []string
	for _, ref := range inv {
		names = append(names, ref.Kind+"/"+ref.Name)
	}
	cms, err := s.c.List(ctx, cmGVK, "shop")
	if err != nil {
		return err
	}
	s.saves = append(s.saves, fmt.Sprintf("%s with %d ConfigMaps live", strings.Join(names, ","), len(cms)))
	return s.MemoryStore.SaveInventory(ctx, inv)
}

func TestInventoryIsRecordedBeforeWriting(t *testing.T) {
	c := newCluster(t, shopNamespace)
	store := &recordingStore{c: c}
	src := &StaticSource{Revision: "main@sha1:1", Objects: decode(t, config)}
	opts := DefaultOptions()
	opts.Prune = true
	r, err := New(c, sourceFunc{src}, store, opts)
	must(t, err)

	runPass(t, r)
	runPass(t, r) // nothing new: nothing recorded early
	src.Objects = decode(t, config+"---"+strings.ReplaceAll(config, "settings", "extra"))
	src.Revision = "main@sha1:2"
	runPass(t, r)
	src.Objects = decode(t, config)
	src.Revision = "main@sha1:3"
	res := runPass(t, r) // only a removal: nothing recorded early
	if len(res.Pruned) != 1 || res.Pruned[0].Name != "extra" {
		t.Fatalf("pruned %v, errors %v", res.Pruned, res.Errors)
	}
	want := []string{
		"ConfigMap/settings with 0 ConfigMaps live",
		"ConfigMap/settings,ConfigMap/extra with 1 ConfigMaps live",
	}
	if fmt.Sprint(store.saves) != fmt.Sprint(want) {
		t.Fatalf("early saves\n got %q\nwant %q", store.saves, want)
	}

	// A store that cannot record stops the pass before any write.
	store.fail = errors.New("etcd is full")
	src.Objects = decode(t, config+"---"+strings.ReplaceAll(config, "settings", "third"))
	src.Revision = "main@sha1:4"
	if _, err := r.Reconcile(context.Background()); err == nil || !strings.Contains(err.Error(), "recording the inventory before applying: etcd is full") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Get(context.Background(), cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "third"}); !apierrors.IsNotFound(err) {
		t.Fatalf("created without an inventory: %v", err)
	}
}

// dyingCluster cancels the pass after its first write, as a process killed
// mid-pass stops.
type dyingCluster struct {
	cluster.Cluster
	cancel context.CancelFunc
}

func (d dyingCluster) Apply(ctx context.Context, obj *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, error) {
	out, err := d.Cluster.Apply(ctx, obj, opts)
	if !opts.DryRun {
		d.cancel()
	}
	return out, err
}

func TestInterruptedPassIsPrunedLater(t *testing.T) {
	c := newCluster(t, shopNamespace)
	store := &MemoryStore{}
	opts := DefaultOptions()
	opts.Prune, opts.Concurrency = true, 1
	two := decode(t, config+"---"+strings.ReplaceAll(config, "settings", "extra"))

	ctx, cancel := context.WithCancel(context.Background())
	r, err := New(dyingCluster{Cluster: c, cancel: cancel}, StaticSource{Revision: "main@sha1:1", Objects: two}, store, opts)
	must(t, err)
	if _, err := r.Reconcile(ctx); err == nil {
		t.Fatal("the interrupted pass reported no error")
	}
	cms, err := c.List(context.Background(), cmGVK, "shop")
	must(t, err)
	if len(cms) != 1 {
		t.Fatalf("%d ConfigMaps after the interrupted pass, want 1", len(cms))
	}

	// A new process, with Git now empty, prunes what the dead one created.
	r, err = New(c, StaticSource{Revision: "main@sha1:2"}, store, opts)
	must(t, err)
	res := runPass(t, r)
	if len(res.Pruned) != 1 || res.Pruned[0].Name != cms[0].GetName() || len(res.Errors) > 0 {
		t.Fatalf("pruned %v, errors %v", res.Pruned, res.Errors)
	}
}

func TestNamespaceDefaultedForAKindItsCRDBrings(t *testing.T) {
	c := newCluster(t, "")
	r, _ := newReconciler(t, c, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`, DefaultOptions())
	res := runPass(t, r)
	if !res.Synced() || res.Count(Created) != 4 {
		t.Fatalf("%v %v", actions(res), res.Errors)
	}
	for _, ref := range []cluster.Ref{
		{GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Namespace: "default", Name: "w"},
		{GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}, Name: "g"},
	} {
		if _, err := c.Get(context.Background(), ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	fieldConflict := apierrors.NewApplyConflict([]metav1.StatusCause{{Type: "FieldManagerConflict", Field: ".spec.replicas"}}, "conflict")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"canceled", context.Canceled, false},
		{"unavailable", apierrors.NewServiceUnavailable("restarting"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"bare 503", apierrors.NewGenericServerResponse(503, "get", gr, "w", "", 0, true), true},
		{"bare 404: a kind not served", apierrors.NewGenericServerResponse(404, "get", gr, "w", "", 0, true), false},
		{"not found", apierrors.NewNotFound(gr, "w"), false},
		{"resourceVersion conflict", apierrors.NewConflict(gr, "w", errors.New("modified")), true},
		{"field manager conflict", fieldConflict, false},
		{"connection refused", &net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, true},
		{"invalid", apierrors.NewBadRequest("no"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// nsStore is a MemoryStore kept in a namespace of the cluster, as the
// GitSync is: saving fails with NotFound until the namespace exists.
type nsStore struct {
	MemoryStore
	c     cluster.Cluster
	ns    string
	saves int
}

func (s *nsStore) SaveInventory(ctx context.Context, inv []cluster.Ref) error {
	if _, err := s.c.Get(ctx, cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: s.ns}); err != nil {
		return fmt.Errorf("applying the spec of GitSync %s/truce: %w", s.ns, err)
	}
	s.saves++
	return s.MemoryStore.SaveInventory(ctx, inv)
}

func TestInventoryOfASyncInANamespaceItCreates(t *testing.T) {
	c := newCluster(t, "")
	opts := DefaultOptions()
	opts.Namespace, opts.Prune = "shop", true
	store := &nsStore{c: c, ns: "shop"}
	r, err := New(c, StaticSource{Revision: "main@sha1:1", Objects: decode(t, shopNamespace+"---"+config)}, store, opts)
	must(t, err)
	res := runPass(t, r)
	if !res.Synced() || res.Count(Created) != 2 || store.saves != 1 {
		t.Fatalf("%v %v, %d early saves", actions(res), res.Errors, store.saves)
	}
	if inv := store.Last().State.Inventory; len(inv) != 2 {
		t.Fatalf("inventory %v", inv)
	}
	// Without the namespace in Git the failure stops the pass unwritten.
	c2 := newCluster(t, "")
	r, err = New(c2, StaticSource{Revision: "main@sha1:1", Objects: decode(t, config)}, &nsStore{c: c2, ns: "elsewhere"}, opts)
	must(t, err)
	if _, err := r.Reconcile(context.Background()); err == nil || !strings.Contains(err.Error(), "recording the inventory before applying") {
		t.Fatalf("err = %v", err)
	}
}
