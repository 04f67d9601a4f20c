package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/truce-dev/truce/simulate"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// TextOptions style the text report.
type TextOptions struct {
	// Color adds ANSI colours (a terminal).
	Color bool
	// Verbose lists every object, not only problems, and every write of
	// a timeline.
	Verbose bool
}

const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

// WriteText writes a summary table, then each problem with its evidence
// and fix.
func WriteText(w io.Writer, r *Report, opts TextOptions) error {
	p := &printer{w: w, color: opts.Color}
	p.line(p.bold("Summary"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"TOOL", "UNIT", "OBJECTS"}
	for _, v := range simulate.Verdicts() {
		header = append(header, string(v))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, run := range r.Runs {
		counts := map[simulate.Verdict]int{}
		for _, o := range run.Objects {
			counts[o.Verdict]++
		}
		cells := make([]string, len(simulate.Verdicts()))
		for i, v := range simulate.Verdicts() {
			cells[i] = fmt.Sprint(counts[v])
		}
		unit := run.UnitLabel()
		if unit == "" {
			unit = "(defaults)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", run.Tool, unit, len(run.Objects), strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, run := range r.Runs {
		unit := run.UnitLabel()
		if unit == "" {
			unit = "defaults"
		}
		p.line("")
		p.line(p.bold(fmt.Sprintf("%s (%s): %s", run.Tool, unit, run.Settings)))
		if run.Window > 0 {
			// A unit that could not be rendered was not simulated.
			p.line(fmt.Sprintf("  simulated %s of a %s window", short(run.Simulated), short(run.Window)))
		}
		shown := 0
		for _, o := range run.Objects {
			if !o.Problem() && !opts.Verbose {
				continue
			}
			shown++
			p.object(o, opts.Verbose)
		}
		if shown == 0 {
			p.line("  " + p.paint(ansiGreen, "every object settles"))
		}
	}
	if len(r.Findings) > 0 {
		p.line("")
		p.line(p.bold("Settings"))
		for _, f := range r.Findings {
			if f.Source != "" {
				p.line("  " + f.Source + ": " + f.Message)
			} else {
				p.line("  " + f.Message)
			}
		}
	}
	return p.err
}

type printer struct {
	w     io.Writer
	color bool
	err   error
}

func (p *printer) line(s string) {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, s)
	}
}

func (p *printer) paint(code, s string) string {
	if !p.color {
		return s
	}
	return code + s + ansiReset
}

func (p *printer) bold(s string) string { return p.paint(ansiBold, s) }

func (p *printer) verdict(v simulate.Verdict) string {
	switch v {
	case simulate.Synced:
		return p.paint(ansiGreen, string(v))
	case simulate.Unpredictable:
		return p.paint(ansiYellow, string(v))
	}
	return p.paint(ansiRed, string(v))
}

func (p *printer) object(o Object, verbose bool) {
	p.line("")
	head := fmt.Sprintf("  %s  %s", p.verdict(o.Verdict), o.Object)
	if o.Source != "" {
		head += "  (" + o.Source + ")"
	}
	p.line(head)
	p.line("    " + o.Reason)
	if l := o.Loop; l != nil {
		fields := strings.Join(l.Fields, ", ")
		if fields == "/" {
			fields = "the whole object (deleted and created again)"
		}
		if fields != "" {
			p.line(fmt.Sprintf("    loop: %s", fields))
		}
		p.line(fmt.Sprintf("      writers: %s and %s (%s)", l.Tool, l.Other, l.OtherKind))
		if l.Period > 0 {
			p.line(fmt.Sprintf("      pace: every %s at steady state, %.0f writes per hour; %d writes in the window", short(l.Period), l.WritesPerHour, o.Writes))
		}
	}
	for _, f := range o.Fields {
		line := fmt.Sprintf("    %s: Git %s, live %s", f.Pointer, quoteShort(f.Desired), quoteShort(f.Live))
		if f.Origin != "" {
			line += "  [" + f.Origin + "]"
		}
		if f.IgnoredBy != "" {
			line += "  ignored by " + f.IgnoredBy
		}
		p.line(line)
	}
	if len(o.Timeline) > 0 {
		p.line("    timeline:")
		events := o.Timeline
		const head, tail = 6, 2
		for i, e := range events {
			if !verbose && len(events) > head+tail && i == head {
				p.line(fmt.Sprintf("      … %d more writes …", len(events)-head-tail))
			}
			if !verbose && len(events) > head+tail && i >= head && i < len(events)-tail {
				continue
			}
			who := e.Writer
			if e.ByTool {
				who = p.paint(ansiCyan, who)
			}
			what := strings.Join(e.Changes, "; ")
			if what == "" {
				what = "stored unchanged"
			}
			if len(e.Admission) > 0 {
				what += "; admission: " + strings.Join(e.Admission, "; ")
			}
			if e.Error != "" {
				what = "refused: " + e.Error
			}
			p.line(fmt.Sprintf("      %8s  %s %s: %s", short(e.At), who, e.Verb, what))
		}
	}
	if o.Fix != nil {
		p.fix("fix", *o.Fix, true)
	} else if o.Problem() {
		p.line("    " + p.paint(ansiYellow, "no verified fix"))
	}
	if o.Fix == nil {
		for _, n := range o.Notes {
			p.line("      " + n)
		}
	}
	for _, a := range o.Alternatives {
		p.fix("alternative", a, verbose)
	}
}

func (p *printer) fix(label string, f Fix, diffs bool) {
	status := "not verified"
	if f.Verified {
		status = "verified: " + string(f.Verdict) + " after the fix"
	} else if f.Verdict == simulate.Synced {
		status = "not safe: " + string(f.Verdict) + " only after the tool writes the field again"
	} else if f.Verdict != "" {
		status = "does not resolve it: " + string(f.Verdict) + " after the fix"
	}
	p.line(fmt.Sprintf("    %s: %s (%s, %s)", p.bold(label), f.Title, f.Kind, status))
	p.line("      " + f.Description)
	if f.Warning != "" {
		p.line("      " + p.paint(ansiYellow, "warning: ") + f.Warning)
	}
	if !diffs {
		return
	}
	for _, e := range f.Edits {
		for _, l := range strings.Split(strings.TrimRight(e.Diff, "\n"), "\n") {
			switch {
			case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
				l = p.paint(ansiGreen, l)
			case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---"):
				l = p.paint(ansiRed, l)
			}
			p.line("      " + l)
		}
	}
}

// short formats a duration without trailing zero units ("5m", "1h", "2s").
func short(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	s := d.Round(time.Second).String()
	s = strings.Replace(s, "m0s", "m", 1)
	s = strings.Replace(s, "h0m", "h", 1)
	return s
}

func quoteShort(s string) string {
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	if strings.ContainsAny(s, " \n") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// SortedVerdicts lists the verdicts present in counts, in summary order.
func SortedVerdicts(counts map[simulate.Verdict]int) []simulate.Verdict {
	var out []simulate.Verdict
	for _, v := range simulate.Verdicts() {
		if counts[v] > 0 {
			out = append(out, v)
		}
	}
	var other []simulate.Verdict
	for v := range counts {
		if !slices.Contains(simulate.Verdicts(), v) {
			other = append(other, v)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}
