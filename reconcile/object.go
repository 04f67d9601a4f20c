package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/drift"
)

// kept is a field truce does not write as Git has it: ignored by a rule
// or contested.
type kept struct {
	pointer string // into the live object
	rule    string // the rule's provenance; "" when contested
}

// syncObject decides and applies one object: read live, leave ignored and
// contested fields to their writers, predict what an apply stores, write
// only when that differs from live, and count write-backs for the loop
// breaker.
func (r *Reconciler) syncObject(ctx context.Context, p *pass, d *desired) ObjectResult {
	// Contests in force are carried whatever happens to the object in this
	// pass, so a failed read does not make truce forget them.
	out := ObjectResult{Ref: d.ref, Source: d.source, Contested: p.contestsOf(d.ref)}
	fail := func(msg string) ObjectResult {
		out.Action, out.Error = Failed, msg
		return out
	}
	if err := ctx.Err(); err != nil {
		// The pass is stopping: start nothing new.
		return fail("not applied: " + err.Error())
	}
	live, err := r.get(ctx, d.ref)
	if err != nil {
		p.mu.Lock()
		p.readFailed = true
		p.mu.Unlock()
		return fail(describeErr("reading the live object", err))
	}
	if live != nil {
		if id := trackingOf(live); id != "" && !sameSync(id, r.opts.Namespace, r.opts.Name) {
			return fail(fmt.Sprintf("the live object is tracked by another sync (%s=%s); not applied", TrackingAnnotation, id))
		}
		if live.GetDeletionTimestamp() != nil {
			return fail("the live object is being deleted; it is applied again once it is gone")
		}
	}
	payload := d.obj.DeepCopy()
	var keeps []kept
	if live != nil {
		matches, err := r.rules.Paths(ctx, d.obj, live)
		if err != nil {
			return fail(describeErr("evaluating ignore rules", err))
		}
		for _, m := range matches {
			if m.Pointer == "" {
				// A Flux "" path: the object is left alone once it exists.
				out.Action = Unchanged
				out.Ignored = append(out.Ignored, IgnoredField{Pointer: "", Treatment: Adopt, Rule: m.Rule.String()})
				return out
			}
			keeps = append(keeps, kept{pointer: m.Pointer, rule: m.Rule.String()})
		}
		for _, c := range out.Contested {
			keeps = append(keeps, kept{pointer: c.Pointer})
		}
		for _, k := range keeps {
			treatment, differs := r.leave(live, payload, d.obj, k.pointer)
			if differs && k.rule != "" {
				out.Ignored = append(out.Ignored, IgnoredField{Pointer: k.pointer, Treatment: treatment, Rule: k.rule})
			}
		}
	}
	if live == nil {
		return r.create(ctx, p, d, payload, out)
	}
	predicted, err := r.predict(ctx, live, payload)
	if err != nil {
		return fail(describeApplyErr("predicting the apply", err))
	}
	drifted := driftBetween(predicted, live, keeps)
	if len(drifted) == 0 {
		out.Action = Unchanged
		return out
	}
	// A person's edit is written back on every pass, never counted: only
	// automated writers are contested.
	edits, fought := r.editsByPeople(d.ref, live, predicted, drifted)
	if reached := r.observe(d.ref, fought, predicted); len(reached) > 0 && !r.opts.DryRun {
		for _, ptr := range reached {
			c := r.contest(ctx, p, d, live, payload, predicted, ptr)
			out.Contested = append(out.Contested, c)
			keeps = append(keeps, kept{pointer: ptr})
			r.leave(live, payload, d.obj, ptr)
		}
		if predicted, err = r.predict(ctx, live, payload); err != nil {
			return fail(describeApplyErr("predicting the apply without the contested fields", err))
		}
		if drifted = driftBetween(predicted, live, keeps); len(drifted) == 0 {
			out.Action = Unchanged
			return out
		}
	}
	out.Drifted = drifted
	out.Reverted = edits
	if !r.opts.DryRun {
		if _, err := r.apply(ctx, p, payload); err != nil {
			out.Reverted = nil
			return fail(describeApplyErr("applying", err))
		}
		r.wroteFields(d.ref, drifted, predicted)
		r.reverted(edits)
	}
	out.Action = Configured
	return out
}

// create applies an object that does not exist. Nothing is predicted
// first: there is no live object to compare with, so a dry run would only
// double the requests (the apply reports the same errors). A rehearsal
// predicts instead, to show what would fail.
func (r *Reconciler) create(ctx context.Context, p *pass, d *desired, payload *unstructured.Unstructured, out ObjectResult) ObjectResult {
	out.Action = Created
	if !r.opts.DryRun {
		if _, err := r.apply(ctx, p, payload); err != nil {
			out.Action, out.Error = Failed, describeApplyErr("creating", err)
		}
		return out
	}
	if _, err := r.predict(ctx, nil, payload); err != nil {
		if p.createsDefinitionFor(d, err) {
			// A rehearsal creates nothing, so a new namespace or CRD is not
			// there for the dry run of what goes into it.
			out.Note = "not predicted: its namespace or CRD is created by this sync first"
			return out
		}
		out.Action, out.Error = Failed, describeApplyErr("predicting the apply", err)
	}
	return out
}

// leave makes payload keep the live value of the field at pointer (a
// pointer into live): stripped when another Apply manager owns it, the
// live value adopted otherwise (absent stays absent). differs reports
// whether Git's value differed from live.
func (r *Reconciler) leave(live, payload, git *unstructured.Unstructured, pointer string) (treatment string, differs bool) {
	ltoks := parse(pointer)
	if ltoks == nil {
		return "", false
	}
	lv, lok := get(live.Object, ltoks)
	ptoks, pok := counterpart(live.Object, payload.Object, ltoks)
	if !lok {
		ptoks, pok = ltoks, true
	}
	gtoks, gok := counterpart(live.Object, git.Object, ltoks)
	if !lok {
		gtoks, gok = ltoks, true
	}
	var gv any
	if gok {
		gv, gok = get(git.Object, gtoks)
	}
	differs = gok != lok || !reflect.DeepEqual(gv, lv)
	if r.otherApplyOwner(live, pointer) {
		if pok {
			remove(payload.Object, ptoks)
		}
		return Strip, differs
	}
	if !lok {
		if pok {
			remove(payload.Object, ptoks)
		}
		return Adopt, differs
	}
	if pok {
		set(payload.Object, ptoks, runtime.DeepCopyJSONValue(lv))
	}
	return Adopt, differs
}

// otherApplyOwner reports whether an Apply manager other than truce owns
// the field (a main-resource entry: subresource owners cannot conflict
// with an apply to the resource).
func (r *Reconciler) otherApplyOwner(live *unstructured.Unstructured, pointer string) bool {
	for _, mf := range drift.FieldOwners(live, pointer) {
		if mf.Manager != r.opts.FieldManager && mf.Operation == "Apply" && mf.Subresource == "" {
			return true
		}
	}
	return false
}

// view is what drift compares: labels, annotations and everything outside
// metadata and status (as Flux compares).
func view(u *unstructured.Unstructured) map[string]any {
	c := runtime.DeepCopyJSON(u.Object)
	delete(c, "status")
	meta := map[string]any{}
	if l, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "labels"); ok && l != nil {
		meta["labels"] = runtime.DeepCopyJSONValue(l)
	}
	if a, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations"); ok && a != nil {
		meta["annotations"] = runtime.DeepCopyJSONValue(a)
	}
	c["metadata"] = meta
	return c
}

// driftBetween lists the fields where what the apply stores differs from
// live, leaving out the kept ones.
func driftBetween(predicted, live *unstructured.Unstructured, keeps []kept) []string {
	pv, lv := view(predicted), view(live)
	for _, k := range keeps {
		toks := parse(k.pointer)
		if ptoks, ok := counterpart(live.Object, predicted.Object, toks); ok {
			remove(pv, ptoks)
		}
		remove(lv, toks)
	}
	return admission.Diff(pv, lv)
}

func sameSync(id, namespace, name string) bool {
	return strings.HasPrefix(id, namespace+"/"+name+":")
}

// describeApplyErr explains apply errors, conflicts with their managers.
func describeApplyErr(what string, err error) string {
	if apierrors.IsConflict(err) {
		return what + ": " + err.Error() + " (another field manager owns these fields: turn force on, or add an ignore rule so truce leaves them)"
	}
	return describeErr(what, err)
}

// sortedContests orders contests by object and field.
func sortedContests(cs []Contest) []Contest {
	sort.SliceStable(cs, func(i, j int) bool {
		if a, b := cs[i].Ref.String(), cs[j].Ref.String(); a != b {
			return a < b
		}
		return cs[i].Pointer < cs[j].Pointer
	})
	return cs
}
