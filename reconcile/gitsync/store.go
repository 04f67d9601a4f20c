package gitsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/reconcile"
)

// Store keeps a sync's state in the status of its GitSync object and
// publishes every pass there. Save applies the spec (creating the object)
// and then the status through the status subresource, both with
// server-side apply; Load reads the inventory and the contested fields
// back.
type Store struct {
	client          dynamic.Interface
	namespace, name string
	spec            Spec
	fieldManager    string
}

var _ reconcile.Store = (*Store)(nil)

// NewStore returns the store of the GitSync namespace/name, whose spec
// is spec.
func NewStore(client dynamic.Interface, namespace, name string, spec Spec) *Store {
	return &Store{client: client, namespace: namespace, name: name, spec: spec, fieldManager: reconcile.DefaultFieldManager}
}

// NewStoreForConfig is NewStore with a dynamic client for cfg.
func NewStoreForConfig(cfg *rest.Config, namespace, name string, spec Spec) (*Store, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client for GitSync %s/%s: %w", namespace, name, err)
	}
	return NewStore(client, namespace, name, spec), nil
}

func (s *Store) resource() dynamic.ResourceInterface {
	return s.client.Resource(GVR).Namespace(s.namespace)
}

func (s *Store) String() string { return "GitSync " + s.namespace + "/" + s.name }

// ErrNotInstalled is returned by Check when the API server does not serve
// GitSyncs.
var ErrNotInstalled = errors.New("the GitSync CRD (gitsyncs.truce.dev) is not installed")

// Check verifies that the cluster serves GitSyncs and that they can be
// listed in the namespace, so that a missing CRD is reported once at start
// rather than by every pass.
func (s *Store) Check(ctx context.Context) error {
	_, err := s.resource().List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: kubectl apply -f deploy/sync/crd.yaml (or truce sync --status none)", ErrNotInstalled)
	}
	return fmt.Errorf("listing GitSyncs in %s: %w", s.namespace, err)
}

// Load implements reconcile.Store: the inventory and the contested fields
// of the status; an empty state when the object does not exist yet.
func (s *Store) Load(ctx context.Context) (*reconcile.State, error) {
	obj, err := s.resource().Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &reconcile.State{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s, err)
	}
	st, err := statusOf(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s: %w", s, err)
	}
	state, err := st.State()
	if err != nil {
		return nil, fmt.Errorf("reading the status of %s: %w", s, err)
	}
	return state, nil
}

// Save implements reconcile.Store.
func (s *Store) Save(ctx context.Context, st *reconcile.Status) error {
	live, err := s.applySpec(ctx)
	if err != nil {
		return err
	}
	prev, err := statusOf(live)
	if err != nil {
		// Unreadable: the status is written anew.
		prev = &Status{}
	}
	next := NewStatus(st, prev, live.GetGeneration())
	raw, err := toMap(next)
	if err != nil {
		return fmt.Errorf("encoding the status of %s: %w", s, err)
	}
	return s.applyStatus(ctx, raw)
}

// SaveInventory implements reconcile.Store: the status's inventory is
// replaced, the rest of the status kept as it is.
func (s *Store) SaveInventory(ctx context.Context, inventory []cluster.Ref) error {
	_, raw, err := s.liveStatus(ctx)
	if err != nil {
		return err
	}
	delete(raw, "inventory")
	if inv := inventoryOf(inventory); inv != nil {
		v, err := toValue(inv)
		if err != nil {
			return fmt.Errorf("encoding the inventory of %s: %w", s, err)
		}
		raw["inventory"] = v
	}
	return s.applyStatus(ctx, raw)
}

// RecordFailure shows a pass that could not run (the source or the API
// server unreachable): Ready turns False with reason Error and the error as
// its message; the rest of the status, the inventory above all, is kept as
// it is.
func (s *Store) RecordFailure(ctx context.Context, failure error) error {
	live, raw, err := s.liveStatus(ctx)
	if err != nil {
		return err
	}
	var conds []metav1.Condition
	if c, ok := raw["conditions"]; ok {
		// Conditions that do not decode are replaced.
		_ = fromValue(c, &conds)
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse,
		Reason: ReasonError, Message: truncate(failure.Error()), ObservedGeneration: live.GetGeneration()})
	c, err := toValue(conds)
	if err != nil {
		return fmt.Errorf("encoding the conditions of %s: %w", s, err)
	}
	raw["conditions"] = c
	raw["observedGeneration"] = live.GetGeneration()
	return s.applyStatus(ctx, raw)
}

// liveStatus applies the spec and returns the object and its status as
// stored, to write back with a part changed: a status apply replaces every
// field truce applied before, so the rest must be sent again.
func (s *Store) liveStatus(ctx context.Context) (*unstructured.Unstructured, map[string]any, error) {
	live, err := s.applySpec(ctx)
	if err != nil {
		return nil, nil, err
	}
	raw, _, _ := unstructured.NestedMap(live.Object, "status")
	if raw == nil {
		raw = map[string]any{}
	}
	return live, raw, nil
}

// applySpec applies the spec, creating the object when it is missing, and
// returns the object as stored.
func (s *Store) applySpec(ctx context.Context) (*unstructured.Unstructured, error) {
	obj, err := s.spec.object(s.namespace, s.name)
	if err != nil {
		return nil, fmt.Errorf("applying the spec of %s: %w", s, err)
	}
	live, err := s.resource().Apply(ctx, s.name, obj, metav1.ApplyOptions{FieldManager: s.fieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("applying the spec of %s: %w", s, notInstalled(err))
	}
	return live, nil
}

func (s *Store) applyStatus(ctx context.Context, status map[string]any) error {
	obj := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	obj.SetGroupVersionKind(GVK)
	obj.SetNamespace(s.namespace)
	obj.SetName(s.name)
	if _, err := s.resource().ApplyStatus(ctx, s.name, obj, metav1.ApplyOptions{FieldManager: s.fieldManager, Force: true}); err != nil {
		return fmt.Errorf("writing the status of %s: %w", s, notInstalled(err))
	}
	return nil
}

// notInstalled explains the 404 of a resource the server does not serve.
func notInstalled(err error) error {
	var se apierrors.APIStatus
	if apierrors.IsNotFound(err) && errors.As(err, &se) && (se.Status().Details == nil || se.Status().Details.Name == "") {
		return fmt.Errorf("%w (%w)", ErrNotInstalled, err)
	}
	return err
}

func statusOf(obj *unstructured.Unstructured) (*Status, error) {
	raw, ok := obj.Object["status"]
	st := &Status{}
	if !ok || raw == nil {
		return st, nil
	}
	if err := fromValue(raw, st); err != nil {
		return nil, err
	}
	return st, nil
}

// State is the reconcile.State the status holds.
func (st *Status) State() (*reconcile.State, error) {
	state := &reconcile.State{}
	if st.Inventory != nil {
		for i, e := range st.Inventory.Entries {
			ref, err := ParseInventoryEntry(e)
			if err != nil {
				return nil, fmt.Errorf("inventory entry %d: %w", i, err)
			}
			state.Inventory = append(state.Inventory, ref)
		}
	}
	for i, c := range st.Contested {
		ref, err := c.Object.ref()
		if err != nil {
			return nil, fmt.Errorf("contested[%d]: %w", i, err)
		}
		state.Contested = append(state.Contested, reconcile.Contest{
			Ref: ref, Source: c.Source, Pointer: c.Field,
			Writer: reconcile.Writer{Manager: c.Writer.Manager, Operation: c.Writer.Operation, Admission: c.Writer.Admission},
			Git:    c.Git, Live: c.Live, Changes: c.Changes, Since: c.Since.Time,
			Fix:      reconcile.Fix{Kind: c.Fix.Kind, Description: c.Fix.Description},
			Revision: c.Revision, Admission: c.Admission, Effect: c.Effect,
		})
	}
	return state, nil
}

// NewStatus is the status that shows st, the outcome of a pass, on an
// object of the given generation whose status was prev: conditions keep
// their transition times while they hold, and the last applied revision
// stays when the pass had errors.
func NewStatus(st *reconcile.Status, prev *Status, generation int64) *Status {
	next := &Status{
		ObservedGeneration:    generation,
		Source:                st.Source,
		LastAttemptedRevision: st.Revision,
		LastAppliedRevision:   st.AppliedRevision,
		Counts: Counts{Applied: st.Applied, Unchanged: st.Unchanged, Pruned: st.Pruned, Failed: st.Failed,
			Contested: len(st.State.Contested)},
		Conditions: append([]metav1.Condition(nil), prev.Conditions...),
	}
	if next.LastAppliedRevision == "" {
		next.LastAppliedRevision = prev.LastAppliedRevision
	}
	if !st.LastSync.IsZero() {
		t := metav1.NewTime(st.LastSync)
		next.LastSyncTime = &t
	}
	next.Inventory = inventoryOf(st.State.Inventory)
	next.ManualEdits = manualEdits(prev.ManualEdits, st.Reverted, st.LastSync)
	for _, c := range st.State.Contested {
		next.Contested = append(next.Contested, ContestedField{
			Object: objectRefOf(c.Ref), Source: c.Source, Field: c.Pointer,
			Writer: Writer{Manager: c.Writer.Manager, Operation: c.Writer.Operation, Admission: c.Writer.Admission},
			Git:    c.Git, Live: c.Live, Changes: c.Changes, Since: metav1.NewTime(c.Since),
			Fix:      Fix{Kind: c.Fix.Kind, Description: c.Fix.Description},
			Revision: c.Revision, Admission: c.Admission, Effect: c.Effect,
		})
	}
	for _, c := range Conditions(st) {
		c.ObservedGeneration = generation
		meta.SetStatusCondition(&next.Conditions, c)
	}
	return next
}

// manualEdits adds the edits a pass reverted at t to the count of prev
// and shows the last of them.
func manualEdits(prev ManualEdits, reverted []reconcile.ManualEdit, t time.Time) ManualEdits {
	if len(reverted) == 0 {
		return prev
	}
	next := ManualEdits{Reverted: prev.Reverted + len(reverted)}
	e := reverted[len(reverted)-1]
	next.Last = &ManualEdit{Object: objectRefOf(e.Ref), Field: e.Pointer,
		Writer: Writer{Manager: e.Writer.Manager, Operation: e.Writer.Operation}, Git: e.Git, Live: e.Live, Time: metav1.NewTime(t)}
	return next
}

// inventoryOf is refs as an inventory, nil when empty.
func inventoryOf(refs []cluster.Ref) *Inventory {
	if len(refs) == 0 {
		return nil
	}
	inv := &Inventory{Entries: make([]InventoryEntry, len(refs))}
	for i, ref := range refs {
		inv.Entries[i] = InventoryEntryOf(ref)
	}
	return inv
}

// InventoryEntryOf is ref as an inventory entry.
func InventoryEntryOf(ref cluster.Ref) InventoryEntry {
	return InventoryEntry{ID: strings.Join([]string{ref.Namespace, ref.Name, ref.Group, ref.Kind}, "_"),
		Version: ref.Version}
}

// ParseInventoryEntry reads an entry back. Names, namespaces, groups and
// kinds never hold "_", so the four parts are unambiguous.
func ParseInventoryEntry(e InventoryEntry) (cluster.Ref, error) {
	parts := strings.Split(e.ID, "_")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" || e.Version == "" {
		return cluster.Ref{}, fmt.Errorf("%q (version %q) is not namespace_name_group_kind with a version", e.ID, e.Version)
	}
	return cluster.Ref{
		GroupVersionKind: schema.GroupVersionKind{Group: parts[2], Version: e.Version, Kind: parts[3]},
		Namespace:        parts[0], Name: parts[1],
	}, nil
}

func objectRefOf(ref cluster.Ref) ObjectRef {
	return ObjectRef{APIVersion: ref.GroupVersion().String(), Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
}

func (o ObjectRef) ref() (cluster.Ref, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil || o.APIVersion == "" || o.Kind == "" || o.Name == "" {
		return cluster.Ref{}, fmt.Errorf("object %+v: need an apiVersion, a kind and a name", o)
	}
	return cluster.Ref{GroupVersionKind: gv.WithKind(o.Kind), Namespace: o.Namespace, Name: o.Name}, nil
}

// toMap, toValue and fromValue convert between typed values and the JSON
// values of unstructured objects: integers are int64, other numbers
// float64.
func toMap(v any) (map[string]any, error) {
	out, err := toValue(v)
	if err != nil {
		return nil, err
	}
	m, _ := out.(map[string]any)
	return m, nil
}

func toValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := decode(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func fromValue(v any, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return decode(b, into)
}

// decode unmarshals JSON with numbers as unstructured holds them.
func decode(b []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(into); err != nil {
		return err
	}
	numbers(reflect.ValueOf(into))
	return nil
}

// numbers replaces the json.Numbers in the interface values reachable
// from v (maps, slices, struct fields of type any) with int64 or float64.
func numbers(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			numbers(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				numbers(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			numbers(v.Index(i))
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Interface {
			for _, k := range v.MapKeys() {
				if e := v.MapIndex(k); !e.IsNil() {
					v.SetMapIndex(k, reflect.ValueOf(number(e.Interface())))
				}
			}
		}
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			v.Set(reflect.ValueOf(number(v.Elem().Interface())))
		}
	}
}

func number(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = number(e)
		}
	case []any:
		for i, e := range t {
			t[i] = number(e)
		}
	}
	return v
}
