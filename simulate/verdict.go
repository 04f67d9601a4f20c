package simulate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
)

// rejecter is implemented by tools that stop a reconciliation on a dry run
// the server refuses (Flux), which the write log does not show.
type rejecter interface {
	Rejections() map[cluster.Ref]string
}

// Rejections implements rejecter.
func (f *Flux) Rejections() map[cluster.Ref]string { return f.rejected }

// classify turns the log of a run into a verdict per object: the tool's
// last comparison, and what the writes show.
func classify(ctx context.Context, rec *recorder, tool Tool, desired []Desired, res *Result) error {
	status, err := tool.Compare(ctx, rec)
	if err != nil {
		return fmt.Errorf("%s: final comparison: %w", tool.Name(), err)
	}
	var rejections map[cluster.Ref]string
	if r, ok := tool.(rejecter); ok {
		rejections = r.Rejections()
	}
	byRef := map[cluster.Ref][]Write{}
	for _, w := range res.Writes {
		byRef[w.Ref] = append(byRef[w.Ref], w)
	}
	for _, d := range desired {
		ref := cluster.RefOf(d.Object)
		o := &Object{Ref: ref, Source: d.Source, InGit: true, Drift: status[ref]}
		writes := byRef[ref]
		o.Writes = countWrites(writes)
		judge(o, tool, writes, rejections, res)
		res.Objects = append(res.Objects, o)
	}
	// Objects outside Git the tool deleted.
	pruned := map[cluster.Ref]int{}
	for _, r := range res.Rounds {
		for _, ref := range r.Pruned {
			pruned[ref]++
		}
	}
	refs := make([]cluster.Ref, 0, len(pruned))
	for ref := range pruned {
		refs = append(refs, ref)
	}
	sortRefs(refs)
	for _, ref := range refs {
		writes := byRef[ref]
		o := &Object{Ref: ref, InGit: false, Verdict: Pruned, Writes: countWrites(writes)}
		creator := ""
		for _, w := range writes {
			if !w.ByTool && strings.HasPrefix(w.Verb, "create") && w.Error == "" {
				creator = w.Writer
			}
		}
		o.Reason = fmt.Sprintf("not in Git, but %s counts it as the application's and its prune deletes it", tool.Name())
		if creator != "" {
			o.Reason = fmt.Sprintf("created by %s, not in Git; %s counts it as the application's and its prune deletes it", creator, tool.Name())
		}
		if pruned[ref] > 1 && creator != "" {
			o.Verdict = Loop
			o.Loop = loopOf(writes, tool, []string{"/"}, creator, nil, "controller", res)
			o.Reason = fmt.Sprintf("%s prunes it and %s creates it again, %d times in %s",
				tool.Name(), creator, pruned[ref], res.Simulated.Round(time.Second))
			o.Writes = extrapolate(o, writes, res)
		}
		res.Objects = append(res.Objects, o)
	}
	return nil
}

// judge decides the verdict of an object of Git.
func judge(o *Object, tool Tool, writes []Write, rejections map[cluster.Ref]string, res *Result) {
	var toolWrites, corrective []Write
	recreates := recreations(writes)
	recreated := false
	for i, w := range writes {
		if !w.ByTool {
			continue
		}
		toolWrites = append(toolWrites, w)
		if w.Error == "" && (!strings.Contains(w.Verb, "create") || recreates[i]) {
			corrective = append(corrective, w)
			recreated = recreated || recreates[i]
		}
	}
	if msg, ok := rejections[o.Ref]; ok {
		o.Verdict, o.Rejection = Rejected, msg
		o.Reason = "the server refuses the dry run, so the whole reconciliation stops"
		return
	}
	if n := len(toolWrites); n > 0 && toolWrites[n-1].Error != "" {
		o.Verdict, o.Rejection = Rejected, toolWrites[n-1].Error
		o.Reason = "admission denies the manifest"
		return
	}
	for _, w := range toolWrites {
		for _, u := range w.Unpredictable {
			if !slices.Contains(o.Unpredictable, u) {
				o.Unpredictable = append(o.Unpredictable, u)
			}
		}
	}
	if len(o.Unpredictable) > 0 {
		o.Verdict = Unpredictable
		o.Reason = "webhooks in the write path could not be called offline: " + strings.Join(o.Unpredictable, ", ")
		return
	}
	if len(corrective) >= 2 {
		fields := loopFields(o, writes)
		other, step, kind := otherWriter(fields, writes)
		deleter := lastDeleter(writes)
		if recreated && deleter != "" {
			// Another controller deletes the object and the tool creates
			// it again: the fight is over the whole object.
			fields, other, step, kind = []string{"/"}, deleter, nil, "controller"
		}
		o.Verdict = Loop
		o.Loop = loopOf(writes, tool, fields, other, step, kind, res)
		o.Writes = extrapolate(o, writes, res)
		what := "it"
		if len(fields) > 0 {
			what = strings.Join(fields, ", ")
		}
		o.Reason = fmt.Sprintf("%s writes %s back %d times in %s; %s changes it again",
			tool.Name(), what, len(corrective), res.Simulated.Round(time.Second), other)
		if recreated && deleter != "" {
			o.Reason = fmt.Sprintf("%s deletes it and %s creates it again, %d times in %s",
				deleter, tool.Name(), len(corrective), res.Simulated.Round(time.Second))
		}
		return
	}
	if o.Drift != nil && o.Drift.Status == drift.Rejected {
		// The tool never wrote it (Flux's reconciliation stops at the
		// first object the server refuses; Argo CD without automated
		// sync does not try), but the server refuses its dry run: that
		// is the problem to show, not drift.
		o.Verdict, o.Rejection = Rejected, strings.Join(o.Drift.Notes, "; ")
		o.Reason = "the server refuses the dry run" + lastFailure(tool, res)
		return
	}
	if o.Drift != nil && outOfSync(o.Drift) {
		o.Verdict = OutOfSync
		var fs []string
		for _, f := range o.Drift.Fields {
			if f.IgnoredBy == "" {
				fs = append(fs, f.Pointer)
			}
		}
		switch {
		case o.Drift.Status == drift.Missing && len(toolWrites) > 0:
			o.Reason = fmt.Sprintf("deleted after %s created it, and %s does not create it again", tool.Name(), tool.Name())
		case o.Drift.Status == drift.Missing:
			o.Reason = fmt.Sprintf("%s never created it", tool.Name())
		case len(fs) == 0:
			// The tool's own comparison found drift that its listing
			// of fields does not place.
			o.Reason = fmt.Sprintf("%s shows it as drifted and does not correct it", tool.Name())
		default:
			o.Reason = fmt.Sprintf("%s shows drift on %s and does not correct it", tool.Name(), strings.Join(fs, ", "))
		}
		o.Reason += lastFailure(tool, res)
		return
	}
	o.Verdict = Synced
	o.Reason = "applied once, then in sync"
	if len(corrective) == 1 {
		o.Reason = "corrected once, then in sync"
	}
	if o.Drift != nil && o.Drift.Status == drift.Excluded && len(o.Drift.Notes) > 0 {
		// The tool does not compare it (helm-controller without drift
		// detection): in sync is what it reports, not what it checked.
		o.Reason = "applied once; " + strings.Join(o.Drift.Notes, "; ")
	}
}

// lastFailure says why the tool's last reconciliation failed, if it did.
func lastFailure(tool Tool, res *Result) string {
	n := len(res.Rounds)
	if n == 0 || len(res.Rounds[n-1].Failed) == 0 {
		return ""
	}
	out := fmt.Sprintf("; its last reconciliation failed (%s)", res.Rounds[n-1].Failed[0])
	if tool.Name() == "argocd" {
		out += ", and Argo CD does not auto-sync a revision again after a failed attempt"
	}
	return out
}

// loopFields are the fields the loop is about: those both the tool and
// another writer changed after creation, and those that still differ (what
// admission changes in the tool's own request shows only there). A field
// the tool set once, when it first took the object over, is not part of it.
func loopFields(o *Object, writes []Write) []string {
	byTool, byOthers := map[string]bool{}, map[string]bool{}
	created := false
	for _, w := range writes {
		if w.Error != "" {
			continue
		}
		if !created && strings.Contains(w.Verb, "create") {
			created = true
			continue
		}
		for _, f := range w.Fields {
			if bookkeeping(f.Pointer) {
				continue
			}
			if w.ByTool {
				byTool[f.Pointer] = true
			} else {
				byOthers[f.Pointer] = true
			}
		}
	}
	set := map[string]bool{}
	for p := range byTool {
		if byOthers[p] {
			set[p] = true
		}
	}
	if o.Drift != nil {
		for _, f := range o.Drift.Fields {
			if f.IgnoredBy == "" && !bookkeeping(f.Pointer) {
				set[f.Pointer] = true
			}
		}
	}
	if len(set) == 0 {
		for p := range byTool {
			set[p] = true
		}
		for p := range byOthers {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// bookkeeping fields change with every write and are nobody's fight.
func bookkeeping(p string) bool {
	return strings.HasPrefix(p, "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration") ||
		strings.HasPrefix(p, "/status")
}

// otherWriter finds who writes the loop's fields besides the tool: the last
// other writer that changed one of them, else the admission step that
// changed the tool's own request.
func otherWriter(fields []string, writes []Write) (string, *admission.Step, string) {
	for i := len(writes) - 1; i >= 0; i-- {
		w := writes[i]
		if w.ByTool || w.Error != "" {
			continue
		}
		for _, f := range w.Fields {
			if slices.Contains(fields, f.Pointer) {
				return w.Writer, nil, "controller"
			}
		}
	}
	for i := len(writes) - 1; i >= 0; i-- {
		w := writes[i]
		if !w.ByTool {
			continue
		}
		for _, s := range w.Admission {
			for _, f := range s.Fields {
				if slices.Contains(fields, f) {
					return s.By, &s.Step, "admission"
				}
			}
		}
	}
	for i := len(writes) - 1; i >= 0; i-- {
		if w := writes[i]; w.ByTool && len(w.Admission) > 0 {
			return w.Admission[0].By, &w.Admission[0].Step, "admission"
		}
	}
	return "the API server's admission chain (not observable on this cluster)", nil, "admission"
}

// loopOf measures a loop from the tool's corrective writes: the last gap
// between two of them is the steady-state period.
func loopOf(writes []Write, tool Tool, fields []string, other string, step *admission.Step, kind string, res *Result) *LoopInfo {
	l := &LoopInfo{Fields: fields, Tool: tool.Manager(), Other: other, OtherStep: step, OtherKind: kind}
	var times []time.Duration
	recreates := recreations(writes)
	for i, w := range writes {
		if w.ByTool && w.Error == "" && (w.Verb == "delete" || !strings.Contains(w.Verb, "create") || recreates[i]) {
			times = append(times, w.At)
		}
	}
	for i := len(times) - 1; i > 0; i-- {
		if gap := times[i] - times[i-1]; gap > 0 {
			l.Period = gap
			from, to := times[i-1], times[i]
			n := 0
			for _, w := range writes {
				if w.Error == "" && w.At > from && w.At <= to {
					n++
				}
			}
			l.WritesPerHour = float64(n) * float64(time.Hour) / float64(gap)
			break
		}
	}
	return l
}

// extrapolate counts the object's writes over the whole window: those
// simulated up to the tool's last write, plus the loop's whole cycles that
// fit in the rest of the window.
func extrapolate(o *Object, writes []Write, res *Result) int {
	n := countWrites(writes)
	if o.Loop == nil || o.Loop.Period <= 0 || res.Simulated >= res.Window {
		return n
	}
	var last time.Duration
	for _, w := range writes {
		if w.ByTool && w.Error == "" {
			last = w.At
		}
	}
	upTo := 0
	for _, w := range writes {
		if w.Error == "" && w.At <= last {
			upTo++
		}
	}
	perCycle := int(o.Loop.WritesPerHour*o.Loop.Period.Hours() + 0.5)
	cycles := int((res.Window - last) / o.Loop.Period)
	return upTo + cycles*perCycle
}

func countWrites(writes []Write) int {
	n := 0
	for _, w := range writes {
		if w.Error == "" {
			n++
		}
	}
	return n
}

// recreations marks the tool's creates of an object another writer
// deleted (a cleanup controller): they correct the deletion, as an update
// corrects a change.
func recreations(writes []Write) []bool {
	out := make([]bool, len(writes))
	deleted := false
	for i, w := range writes {
		switch {
		case w.Error != "":
		case !w.ByTool && w.Verb == "delete":
			deleted = true
		case w.ByTool && strings.Contains(w.Verb, "create"):
			out[i] = deleted
			deleted = false
		case w.ByTool:
			deleted = false
		}
	}
	return out
}

// lastDeleter names the last writer other than the tool that deleted the
// object, "" when none did.
func lastDeleter(writes []Write) string {
	for i := len(writes) - 1; i >= 0; i-- {
		if w := writes[i]; !w.ByTool && w.Error == "" && w.Verb == "delete" {
			return w.Writer
		}
	}
	return ""
}
