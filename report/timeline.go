package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The timeline of the HTML page: one lane per writer, a marker per write.
//
// Gaps between writes range from nothing (two writes in one round) to the
// self-heal backoff's cap (5m) or a Flux interval, so a linear axis would
// put the first rounds on top of each other. The axis is compressed
// instead: each gap is drawn as a constant plus the square root of its
// length, so a backoff reads as widening steps and a steady period as even
// ones; writes at the same instant are drawn side by side, in order. The
// tick labels give the real times.

const (
	tlPad      = 2.0  // % of the track kept free at each end
	tlGapBase  = 0.45 // weight of any gap, however short
	tlSameTime = 0.45 // weight between two writes at one instant
	tlLabelMin = 4.2  // % between two tick labels in one row
	tlDense    = 40   // more writes than this: small markers, no numbers
)

type tlView struct {
	ID     string
	Lanes  []*tlLane
	Ticks  []tlTick
	Guides []float64
	Rows   []tlRow
	Dense  bool
	// Drawn is false for a single write: the list says it all.
	Drawn bool
	// Span is the stretch the markers cover; Scale says how it is drawn.
	Span, Scale string
	// Phases mark the tool's rhythm under the axis: its backoff, its
	// steady period.
	Phases []tlPhase
	// What the legend needs to explain.
	HasNoop, HasOther, HasAdm, HasErr bool
}

type tlPhase struct {
	From, To float64
	Label    string
}

type tlLane struct {
	Label string
	// Kind says what the writer is: "GitOps tool · Argo CD", "admission",
	// "controller".
	Kind    string
	Tool    bool
	Markers []tlMarker
}

type tlMarker struct {
	X     float64
	N     int
	Class string
	Title string
}

type tlTick struct {
	X     float64
	Label string
	Row   int // 0 or 1; -1 for an unlabelled tick
}

type tlRow struct {
	N         int
	At        string
	Writer    string
	Tool      bool
	Verb      string
	Changes   []string
	Admission []string
	Error     string
	Noop      bool
}

func buildTimeline(id string, run *Run, o *Object) *tlView {
	if len(o.Timeline) == 0 {
		return nil
	}
	events := slices.Clone(o.Timeline)
	order := make([]int, len(events))
	for i := range order {
		order[i] = i
	}
	// In time order; writes at one instant stay in the order they were made.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(events[a].At, events[b].At) })

	v := &tlView{ID: id, Dense: len(events) > tlDense, Drawn: len(events) > 1}

	// Lanes: the tool, then the loop's other writer, then everyone else in
	// order of appearance.
	toolName := ""
	if o.Loop != nil {
		toolName = o.Loop.Tool
	}
	for _, i := range order {
		if toolName == "" && events[i].ByTool {
			toolName = events[i].Writer
		}
	}
	toolLane := &tlLane{Label: cmp.Or(toolName, ToolTitle(run.Tool)), Kind: "GitOps tool · " + ToolTitle(run.Tool), Tool: true}
	v.Lanes = append(v.Lanes, toolLane)
	laneOf := func(name, kind string) *tlLane {
		for _, l := range v.Lanes[1:] {
			if sameWriter(l.Label, name) {
				return l
			}
		}
		l := &tlLane{Label: name, Kind: kind}
		v.Lanes = append(v.Lanes, l)
		return l
	}
	if o.Loop != nil && o.Loop.Other != "" {
		kind := o.Loop.OtherKind
		if kind == "admission" {
			kind = "admission · changes the tool's request"
		}
		laneOf(o.Loop.Other, cmp.Or(kind, "other writer"))
	}

	// Positions.
	var maxGap time.Duration
	for k := 1; k < len(order); k++ {
		maxGap = max(maxGap, events[order[k]].At-events[order[k-1]].At)
	}
	ref := max(maxGap.Seconds(), 1)
	pos := make([]float64, len(events))
	cursor := 0.0
	var groupStarts []int // indexes into order
	for k, i := range order {
		switch {
		case k == 0:
			groupStarts = append(groupStarts, k)
		case events[i].At == events[order[k-1]].At:
			cursor += tlSameTime
		default:
			gap := (events[i].At - events[order[k-1]].At).Seconds()
			cursor += tlGapBase + math.Sqrt(gap/ref)
			groupStarts = append(groupStarts, k)
		}
		pos[i] = cursor
	}
	total := cursor
	x := func(p float64) float64 {
		if total == 0 {
			return tlPad
		}
		return math.Round((tlPad+(100-2*tlPad)*p/total)*100) / 100
	}

	// Ticks: one per instant, labelled where the label fits (two rows).
	last := [2]float64{-100, -100}
	for _, k := range groupStarts {
		i := order[k]
		t := tlTick{X: x(pos[i]), Label: clockDuration(events[i].At), Row: -1}
		for row := 0; row < 2; row++ {
			if t.X-last[row] >= tlLabelMin {
				t.Row, last[row] = row, t.X
				break
			}
		}
		v.Ticks = append(v.Ticks, t)
		v.Guides = append(v.Guides, t.X)
	}
	if n := len(order); n > 0 {
		first, lastAt := events[order[0]].At, events[order[n-1]].At
		v.Span = fmt.Sprintf("%s – %s", clockDuration(first), clockDuration(lastAt))
	}
	v.Phases = toolPhases(events, order, func(t time.Duration) float64 {
		for _, k := range groupStarts {
			if events[order[k]].At == t {
				return x(pos[order[k]])
			}
		}
		return 0
	})
	v.Scale = "Time axis compressed: each gap is drawn as √ of its length, writes at the same instant side by side; the labels are real times."

	// Markers and the list.
	for n, i := range order {
		e := events[i]
		num := n + 1
		row := tlRow{
			N: num, At: "+" + clockDuration(e.At), Writer: e.Writer, Tool: e.ByTool, Verb: e.Verb,
			Changes: e.Changes, Admission: e.Admission, Error: e.Error,
			Noop: e.Error == "" && len(e.Changes) == 0,
		}
		v.Rows = append(v.Rows, row)

		lane := toolLane
		class := "write tool"
		if !e.ByTool {
			lane = laneOf(e.Writer, "controller")
			class = "write other"
		}
		switch {
		case e.Error != "":
			class += " err"
			v.HasErr = true
		case row.Noop:
			class += " noop"
			v.HasNoop = true
		}
		if !e.ByTool {
			v.HasOther = true
		}
		if len(e.Admission) > 0 {
			v.HasAdm = true
		}
		lane.Markers = append(lane.Markers, tlMarker{X: x(pos[i]), N: num, Class: class, Title: markerTitle(row)})

		// Admission steps wrote in the same instant, into the request.
		for _, a := range e.Admission {
			l := laneOf(admissionStep(a), "admission")
			l.Markers = append(l.Markers, tlMarker{
				X: x(pos[i]), N: num, Class: "write other adm",
				Title: fmt.Sprintf("#%d at %s: %s changed the request of %s's %s", num, row.At, a, cmp.Or(e.Writer, "the tool"), e.Verb),
			})
		}
	}
	return v
}

// toolPhases finds the rhythm of the tool's writes: the last run of at
// least three equal gaps (its steady period) and, just before it, a run of
// growing gaps (a backoff).
func toolPhases(events []Event, order []int, xAt func(time.Duration) float64) []tlPhase {
	var times []time.Duration
	for _, i := range order {
		e := events[i]
		if e.ByTool && e.Error == "" && (len(times) == 0 || e.At > times[len(times)-1]) {
			times = append(times, e.At)
		}
	}
	if len(times) < 4 {
		return nil
	}
	gap := func(i int) time.Duration { return times[i+1] - times[i] } // i < len(times)-1
	same := func(a, b time.Duration) bool { d := a - b; return max(d, -d)*100 <= max(a, b) }
	// The last run of equal gaps.
	end := len(times) - 2
	for end >= 2 && !(same(gap(end), gap(end-1)) && same(gap(end-1), gap(end-2))) {
		end--
	}
	if end < 2 {
		return nil
	}
	start := end - 2
	for start > 0 && same(gap(start-1), gap(end)) {
		start--
	}
	var out []tlPhase
	// Growing gaps up to the steady run.
	b := start
	for b > 0 && gap(b-1) < gap(b) {
		b--
	}
	if start-b >= 3 {
		out = append(out, tlPhase{
			From: xAt(times[b]), To: xAt(times[start]),
			Label: fmt.Sprintf("backoff %s → %s", clockDuration(gap(b)), clockDuration(gap(start-1))),
		})
	}
	out = append(out, tlPhase{
		From: xAt(times[start]), To: xAt(times[end+1]),
		Label: fmt.Sprintf("every %s", clockDuration(gap(end))),
	})
	return out
}

func markerTitle(r tlRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d at %s: %s %s", r.N, r.At, r.Writer, r.Verb)
	switch {
	case r.Error != "":
		b.WriteString("\nrejected: " + r.Error)
	case r.Noop:
		b.WriteString("\nstored unchanged")
	}
	for _, c := range r.Changes {
		b.WriteString("\n" + c)
	}
	for _, a := range r.Admission {
		b.WriteString("\nadmission: " + a)
	}
	return b.String()
}

// admissionStep is the step an Event.Admission entry names: the text
// before a ": fields" suffix, if any.
func admissionStep(s string) string {
	if i := strings.Index(s, "): "); i >= 0 {
		return s[:i+1]
	}
	if i := strings.Index(s, ": "); i >= 0 {
		return s[:i]
	}
	return s
}

// sameWriter reports whether two names are the same writer, one possibly
// with details the other lacks ("MutatingAdmissionPolicy/mirror" and
// "MutatingAdmissionPolicy/mirror (binding mirror)").
func sameWriter(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return a != "" && strings.HasPrefix(b, a) && (b[len(a)] == ' ' || b[len(a)] == ':')
}
