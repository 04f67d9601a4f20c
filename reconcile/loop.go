package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
)

// fieldKey names one field of one object, whatever the version.
type fieldKey struct {
	ref     cluster.Ref
	pointer string
}

func keyOf(ref cluster.Ref, pointer string) fieldKey {
	ref.Version = ""
	return fieldKey{ref: ref, pointer: pointer}
}

// fieldHistory is the loop breaker's memory of one field: the value truce
// writes and when it found that value changed by someone else.
type fieldHistory struct {
	value   any
	changes []time.Time
}

// observe counts, for each drifted field, that truce's value was changed
// again, and returns the fields whose count reached the threshold within
// the window. A field whose Git value changed starts again from zero.
func (r *Reconciler) observe(ref cluster.Ref, drifted []string, predicted *unstructured.Unstructured) []string {
	if r.opts.Loop.Threshold == 0 {
		return nil
	}
	now := r.now()
	pv := view(predicted)
	r.mu.Lock()
	defer r.mu.Unlock()
	var reached []string
	for _, ptr := range drifted {
		v, _ := get(pv, parse(ptr))
		k := keyOf(ref, ptr)
		h := r.history[k]
		switch {
		case h == nil:
			// truce applied this field before (or seeded it at creation) and
			// finds it changed: the first change.
			h = &fieldHistory{value: runtime.DeepCopyJSONValue(v), changes: []time.Time{now}}
			r.history[k] = h
		case !reflect.DeepEqual(h.value, v):
			// Git changed the value: a new intent, not a fight.
			h.value, h.changes = runtime.DeepCopyJSONValue(v), nil
		default:
			h.changes = append(h.changes, now)
		}
		cut := now.Add(-r.opts.Loop.Window)
		for len(h.changes) > 0 && h.changes[0].Before(cut) {
			h.changes = h.changes[1:]
		}
		if len(h.changes) >= r.opts.Loop.Threshold {
			reached = append(reached, ptr)
		}
	}
	return reached
}

// wroteFields records the values truce wrote.
func (r *Reconciler) wroteFields(ref cluster.Ref, drifted []string, predicted *unstructured.Unstructured) {
	if r.opts.Loop.Threshold == 0 {
		return
	}
	pv := view(predicted)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ptr := range drifted {
		v, _ := get(pv, parse(ptr))
		k := keyOf(ref, ptr)
		if h := r.history[k]; h != nil {
			h.value = runtime.DeepCopyJSONValue(v)
		}
	}
}

// forget drops the loop breaker's memory of a field (its contest lifted).
func (r *Reconciler) forget(ref cluster.Ref, pointer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.history, keyOf(ref, pointer))
}

func (r *Reconciler) changesOf(ref cluster.Ref, pointer string) (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.history[keyOf(ref, pointer)]
	if h == nil || len(h.changes) == 0 {
		return 0, r.now()
	}
	return len(h.changes), h.changes[0]
}

// contest stops truce writing ptr on d: names the other writer and the
// fix, records an Event and a metric.
func (r *Reconciler) contest(ctx context.Context, p *pass, d *desired, live, payload, predicted *unstructured.Unstructured, ptr string) Contest {
	n, since := r.changesOf(d.ref, ptr)
	toks := parse(ptr)
	gitValue, _ := get(view(predicted), toks)
	liveValue, _ := get(view(live), toks)
	c := Contest{Ref: d.ref, Source: d.source, Pointer: ptr, Git: gitValue, Live: liveValue,
		Changes: n, Since: since, Revision: p.revision}
	var replayed *replay
	if r.admission != nil {
		replayed = r.replay(ctx, live, payload)
		if dg, err := p.admissionDigest(ctx, r.admission); err == nil {
			c.Admission = dg
			c.Effect = replayed.effect(ptr)
		}
	}
	c.Writer = r.attribute(live, replayed, ptr)
	c.Fix = recommend(c, d)
	p.addContest(c)
	r.metrics.Contested(c)
	r.recorder.Event(d.ref, "Warning", "Contested", fmt.Sprintf(
		"truce stopped writing %s: %s changed it %d times since %s (Git %s, live %s). %s",
		ptr, c.Writer, n, since.UTC().Format(time.RFC3339), short(gitValue), short(liveValue), c.Fix.Description))
	r.log.Warn("field contested", "object", d.ref.String(), "field", ptr, "writer", c.Writer.String(), "changes", n)
	return c
}

// attribute names who changed ptr: a field manager other than truce that
// owns it now, or, when only truce owns it (the change was made inside
// truce's own write), the admission step found by replaying the write
// (nil: no admission view).
func (r *Reconciler) attribute(live *unstructured.Unstructured, replayed *replay, ptr string) Writer {
	if w := r.lastWriter(live, ptr); w != nil {
		return *w
	}
	if replayed == nil {
		return Writer{Admission: "mutating admission (not replayed: no admission view configured)"}
	}
	if replayed.err != nil {
		return Writer{Admission: "mutating admission (replay failed: " + replayed.err.Error() + ")"}
	}
	names := replayed.changers(ptr)
	if len(names) == 0 {
		return Writer{Admission: "mutating admission not visible offline (a webhook truce cannot call, or a policy changed since)"}
	}
	return Writer{Admission: strings.Join(names, ", ")}
}

// lastWriter is the field manager other than truce that owns ptr and
// wrote last (its operation with the subresource written through: Apply,
// Update, Update scale); nil when only truce owns it.
func (r *Reconciler) lastWriter(live *unstructured.Unstructured, ptr string) *Writer {
	var best *Writer
	var bestTime time.Time
	for _, mf := range drift.FieldOwners(live, ptr) {
		if mf.Manager == r.opts.FieldManager {
			continue
		}
		var t time.Time
		if mf.Time != nil {
			t = mf.Time.Time
		}
		if best == nil || t.After(bestTime) {
			op := string(mf.Operation)
			if mf.Subresource != "" {
				op += " " + mf.Subresource
			}
			best, bestTime = &Writer{Manager: mf.Manager, Operation: op}, t
		}
	}
	return best
}

// replay is the offline admission chain's answer to one of truce's
// writes.
type replay struct {
	stored  *unstructured.Unstructured
	changes []admission.Change
	err     error
}

func (r *Reconciler) replay(ctx context.Context, live, payload *unstructured.Unstructured) *replay {
	stored, changes, err := r.admission.Predict(ctx, live, payload, r.applyOptions(true))
	return &replay{stored: stored, changes: changes, err: err}
}

// changers names the admission steps that changed ptr (or a field above
// or below it). Changes are admission's only: the object that enters
// admission is already defaulted.
func (rp *replay) changers(ptr string) []string {
	var names []string
	for _, ch := range rp.changes {
		if under(ptr, ch.Path) || under(ch.Path, ptr) {
			if !contains(names, ch.By) {
				names = append(names, ch.By)
			}
		}
	}
	sort.Strings(names)
	return names
}

// effect digests what the replay did to ptr: the value stored and who
// changed it; "" when the replay failed (any change then lifts).
func (rp *replay) effect(ptr string) string {
	if rp == nil || rp.err != nil || rp.stored == nil {
		return ""
	}
	v, ok := get(view(rp.stored), parse(ptr))
	b, err := jsonMarshal(struct {
		Value   any      `json:"value"`
		Present bool     `json:"present"`
		By      []string `json:"by"`
	}{v, ok, rp.changers(ptr)})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// recommend is truce check's fix for a contested field, in its order of
// preference: put the mutation in Git for admission, an ignore rule that
// hands the field to a controller (people are never contested).
func recommend(c Contest, d *desired) Fix {
	target := fmt.Sprintf("{kind: %s, name: %s", c.Ref.Kind, c.Ref.Name)
	if c.Ref.Group != "" {
		target = fmt.Sprintf("{group: %s, kind: %s, name: %s", c.Ref.Group, c.Ref.Kind, c.Ref.Name)
	}
	if c.Ref.Namespace != "" {
		target += ", namespace: " + c.Ref.Namespace
	}
	target += "}"
	rule := fmt.Sprintf("ignore: [{paths: [%q], target: %s}]", c.Pointer, target)
	where := d.source
	if where == "" {
		where = "the manifest"
	}
	switch {
	case c.Writer.Admission != "":
		return Fix{Kind: string(drift.FixGitValue), Description: fmt.Sprintf(
			"Put the mutation in Git: write %s = %s into %s, the value admission stores, so there is nothing left to change; "+
				"or switch the policy from mutate to validate. If Git must not know the value, add %s.",
			c.Pointer, short(c.Live), where, rule)}
	}
	return Fix{Kind: string(drift.FixIgnoreRule), Description: fmt.Sprintf(
		"Hand %s to %s with %s: truce then seeds Git's value on creation and leaves the field to it.",
		c.Pointer, c.Writer.Manager, rule)}
}

func short(v any) string {
	s := fmt.Sprintf("%v", v)
	if b, err := jsonMarshal(v); err == nil {
		s = string(b)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
