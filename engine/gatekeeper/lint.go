package gatekeeper

import (
	"context"
	"fmt"
	"slices"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrNotConverging is Gatekeeper's: its mutators kept changing the object
// for as many rounds as there are mutators, plus one.
var ErrNotConverging = mutation.ErrNotConverging

// Mutators are a repository's Gatekeeper mutators as Gatekeeper's mutator
// controllers ingest them, for the lint rules: all of them in one
// mutation system, as the webhook runs them, and each alone.
type Mutators struct {
	// Objects are the mutators, in the order they were given.
	Objects []*unstructured.Unstructured
	all     *mutation.System
	alone   []*mutation.System
	ids     []types.ID
	applyTo [][]k8sschema.GroupVersionKind
}

// IsMutator reports whether o is a mutator kind Gatekeeper runs.
func IsMutator(o *unstructured.Unstructured) bool {
	_, ok := mutatorKinds[o.GetKind()]
	return ok && o.GroupVersionKind().Group == mutationsGroup
}

// NewMutators builds the mutators among objs; the others are ignored. A
// mutator Gatekeeper cannot build is returned as a *MutatorError and left
// out, as Gatekeeper's controller leaves it out.
func NewMutators(objs []*unstructured.Unstructured) (*Mutators, []error) {
	m := &Mutators{all: mutation.NewSystem(mutation.SystemOpts{})}
	var errs []error
	for _, o := range objs {
		if !IsMutator(o) {
			continue
		}
		st, err := stored(o)
		if err != nil {
			errs = append(errs, &MutatorError{Kind: o.GetKind(), Name: o.GetName(), Err: err})
			continue
		}
		mut, err := mutatorKinds[o.GetKind()](st)
		if err != nil {
			errs = append(errs, &MutatorError{Kind: o.GetKind(), Name: o.GetName(), Err: err})
			continue
		}
		// A schema conflict is an error of Upsert that still adds the
		// mutator (marked conflicting); Conflicts reports it.
		_ = m.all.Upsert(mut)
		alone := mutation.NewSystem(mutation.SystemOpts{})
		_ = alone.Upsert(mut)
		m.Objects = append(m.Objects, o)
		m.alone = append(m.alone, alone)
		m.ids = append(m.ids, mut.ID())
		var gvks []k8sschema.GroupVersionKind
		if ws, ok := mut.(schema.MutatorWithSchema); ok {
			for _, b := range ws.SchemaBindings() {
				if !slices.Contains(gvks, b.GVK) {
					gvks = append(gvks, b.GVK)
				}
			}
		}
		m.applyTo = append(m.applyTo, gvks)
	}
	return m, errs
}

// ApplyTo is the kinds mutator i names in applyTo (none for
// AssignMetadata, which applies to every kind).
func (m *Mutators) ApplyTo(i int) []k8sschema.GroupVersionKind { return m.applyTo[i] }

// Conflicts returns, for each mutator, the indexes of the others whose
// implied schemas conflict with its own: Gatekeeper applies none of them.
func (m *Mutators) Conflicts() map[int][]int {
	index := map[types.ID]int{}
	for i, id := range m.ids {
		index[id] = i
	}
	out := map[int][]int{}
	for i, id := range m.ids {
		for other := range m.all.GetConflicts(id) {
			if j, ok := index[other]; ok && j != i {
				out[i] = append(out[i], j)
			}
		}
	}
	return out
}

// Mutate runs Gatekeeper's mutation of obj (a CREATE in namespace ns, nil
// for a cluster-scoped object) with every mutator, as its webhook does,
// and returns the mutated copy. An error is what the webhook answers with
// a denial: a mutator failing, or ErrNotConverging.
func (m *Mutators) Mutate(ctx context.Context, obj *unstructured.Unstructured, ns *corev1.Namespace) (*unstructured.Unstructured, error) {
	return mutateWith(ctx, m.all, obj, ns)
}

// MutateAlone runs mutator i alone on obj.
func (m *Mutators) MutateAlone(ctx context.Context, i int, obj *unstructured.Unstructured, ns *corev1.Namespace) (*unstructured.Unstructured, error) {
	return mutateWith(ctx, m.alone[i], obj, ns)
}

func mutateWith(ctx context.Context, sys *mutation.System, obj *unstructured.Unstructured, ns *corev1.Namespace) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	mutable := &types.Mutable{
		Object:    out,
		Namespace: ns,
		Username:  "system:admin",
		Source:    types.SourceTypeOriginal,
		Operation: admissionv1.Create,
	}
	if _, err := sys.Mutate(ctx, mutable); err != nil {
		// What an external data provider would write is unknown, not a
		// failure: those fields keep their values (see mutateRequest).
		if !externalDataUnresolved(err) || len(unresolved(out.Object, obj.Object)) == 0 {
			return nil, fmt.Errorf("mutating %s %s with Gatekeeper: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return out, nil
}
