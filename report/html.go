package report

import (
	"cmp"
	_ "embed"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/truce-dev/truce/simulate"
)

// One self-contained HTML page: inline CSS, no external resources, and no
// JavaScript (<details> collapses). Everything from the report goes through
// html/template's escaping.

//go:embed html.tmpl
var htmlSource string

var htmlPage = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"sub": func(a, b float64) float64 { return a - b },
}).Parse(htmlSource))

type htmlView struct {
	Repository string
	Failed     bool
	Problems   []*htmlProblem
	Totals     []htmlCount
	Objects    int
	Runs       []htmlRun
	Columns    []htmlCount // verdict columns of the summary table
	Findings   []htmlFinding
	Synced     []htmlSynced
	DocsURL    string
}

type htmlCount struct {
	Verdict simulate.Verdict
	Class   string
	N       int
}

type htmlRun struct {
	Tool, Unit, Settings string
	Window, Simulated    string
	Objects              int
	Counts               []htmlCount
}

type htmlFinding struct {
	Source, Message string
}

type htmlSynced struct {
	Run, Object, Source string
}

type htmlProblem struct {
	N                   int
	ID                  string
	Run                 string
	Tool, Unit          string
	Object, Source      string
	Verdict             simulate.Verdict
	Class               string
	Reason              string
	Writes              int
	Window              string
	Loop                *htmlLoop
	Fields              []Field
	Timeline            *tlView
	Diff                *sbsView
	Fix                 *htmlFix
	Alternatives        []*htmlFix
	HelpURL             string
	HasDesired, HasLive bool
}

type htmlLoop struct {
	Fields                []string
	Tool, Other, Kind     string
	Period, WritesPerHour string
}

type htmlFix struct {
	Kind, Title, Description, Warning string
	Verified                          bool
	Verdict                           simulate.Verdict
	Edits                             []htmlEdit
}

type htmlEdit struct {
	Path  string
	New   bool
	Lines []htmlDiffLine
	Add   int
	Del   int
}

type htmlDiffLine struct {
	Class, Text string
}

// WriteHTML writes the report as one self-contained HTML page.
func WriteHTML(w io.Writer, r *Report) error {
	return htmlPage.Execute(w, buildHTMLView(r))
}

func buildHTMLView(r *Report) *htmlView {
	v := &htmlView{Repository: r.Repository, Failed: r.Failed(), DocsURL: docsURL}
	counts := r.Counts()
	for _, m := range verdictMetas {
		v.Columns = append(v.Columns, htmlCount{Verdict: m.Verdict, Class: m.CSS})
		if n := counts[m.Verdict]; n > 0 {
			v.Totals = append(v.Totals, htmlCount{Verdict: m.Verdict, Class: m.CSS, N: n})
		}
	}
	// Verdicts this version does not know still show.
	known := map[simulate.Verdict]bool{}
	for _, m := range verdictMetas {
		known[m.Verdict] = true
	}
	for verdict, n := range sortedCounts(counts) {
		if !known[verdict] {
			v.Totals = append(v.Totals, htmlCount{Verdict: verdict, Class: "other", N: n})
		}
	}

	for i := range r.Runs {
		run := &r.Runs[i]
		hr := htmlRun{
			Tool: ToolTitle(run.Tool), Unit: run.UnitLabel(), Settings: run.Settings,
			Window: clockDuration(run.Window), Simulated: clockDuration(run.Simulated),
			Objects: len(run.Objects),
		}
		rc := map[simulate.Verdict]int{}
		for _, o := range run.Objects {
			rc[o.Verdict]++
		}
		for _, c := range v.Columns {
			hr.Counts = append(hr.Counts, htmlCount{Verdict: c.Verdict, Class: c.Class, N: rc[c.Verdict]})
		}
		v.Runs = append(v.Runs, hr)
		v.Objects += len(run.Objects)

		for j := range run.Objects {
			o := &run.Objects[j]
			if !o.Problem() {
				v.Synced = append(v.Synced, htmlSynced{Run: runName(run), Object: o.Object, Source: o.Source})
				continue
			}
			v.Problems = append(v.Problems, buildProblem(len(v.Problems)+1, run, o))
		}
	}
	for _, f := range r.Findings {
		v.Findings = append(v.Findings, htmlFinding{Source: f.Source, Message: f.Message})
	}
	return v
}

// sortedCounts iterates over counts by verdict name.
func sortedCounts(m map[simulate.Verdict]int) func(func(simulate.Verdict, int) bool) {
	return func(yield func(simulate.Verdict, int) bool) {
		keys := make([]simulate.Verdict, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

func buildProblem(n int, run *Run, o *Object) *htmlProblem {
	m := metaOf(o.Verdict)
	p := &htmlProblem{
		N: n, ID: "problem-" + strconv.Itoa(n),
		Run: runTitle(run), Tool: run.Tool, Unit: run.UnitLabel(),
		Object: o.Object, Source: o.Source,
		Verdict: o.Verdict, Class: m.CSS, Reason: o.Reason,
		Writes: o.Writes, Window: clockDuration(run.Window),
		Fields:  o.Fields,
		HelpURL: m.helpURI(),
	}
	if l := o.Loop; l != nil {
		p.Loop = &htmlLoop{
			Fields: l.Fields, Tool: l.Tool, Other: l.Other, Kind: l.OtherKind,
			Period:        clockDuration(l.Period),
			WritesPerHour: strconv.FormatFloat(l.WritesPerHour, 'f', -1, 64),
		}
	}
	p.Timeline = buildTimeline("timeline-"+strconv.Itoa(n), run, o)
	if o.Desired != "" || o.Live != "" {
		p.Diff = sideBySide(o.Desired, o.Live)
		p.HasDesired, p.HasLive = o.Desired != "", o.Live != ""
	}
	if o.Fix != nil {
		p.Fix = buildFix(o.Fix)
	}
	for i := range o.Alternatives {
		p.Alternatives = append(p.Alternatives, buildFix(&o.Alternatives[i]))
	}
	return p
}

func buildFix(f *Fix) *htmlFix {
	h := &htmlFix{
		Kind: f.Kind, Title: f.Title, Description: f.Description, Warning: f.Warning,
		Verified: f.Verified, Verdict: cmp.Or(f.Verdict, simulate.Synced),
	}
	for _, e := range f.Edits {
		he := htmlEdit{Path: e.Path, New: e.New}
		for _, l := range strings.Split(strings.TrimRight(e.Diff, "\n"), "\n") {
			class := ""
			switch {
			case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"),
				strings.HasPrefix(l, "diff "), strings.HasPrefix(l, "index "):
				class = "meta"
			case strings.HasPrefix(l, "@@"):
				class = "hunk"
			case strings.HasPrefix(l, "+"):
				class = "add"
				he.Add++
			case strings.HasPrefix(l, "-"):
				class = "del"
				he.Del++
			}
			he.Lines = append(he.Lines, htmlDiffLine{Class: class, Text: l})
		}
		h.Edits = append(h.Edits, he)
	}
	return h
}
