package report

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/truce-dev/truce/report/sarif"
	"github.com/truce-dev/truce/simulate"
)

// SARIF 2.1.0, as code scanning (GitHub, GitLab, Azure DevOps, IDE viewers)
// reads it. One SARIF run for the whole check: GitHub no longer merges
// several runs of one tool in an upload, so the GitOps tool and unit of each
// result are in its message and properties instead.

// sarifFingerprint identifies a result across commits even when the
// manifest moves within its file.
const sarifFingerprint = "truceObject/v1"

// keyedResult is a result with what the results are sorted by.
type keyedResult struct {
	sarif.Result
	key sarifResultSortKey
}

// sarifRunProperties is the run's property bag: what was checked.
type sarifRunProperties struct {
	Repository string           `json:"repository,omitempty"`
	Runs       []sarifRunSketch `json:"simulations,omitempty"`
}

// sarifRunSketch describes one simulation of the report.
type sarifRunSketch struct {
	Tool             string  `json:"tool"`
	Unit             string  `json:"unit,omitempty"`
	Settings         string  `json:"settings,omitempty"`
	WindowSeconds    float64 `json:"windowSeconds"`
	SimulatedSeconds float64 `json:"simulatedSeconds"`
	Objects          int     `json:"objects"`
}

// sarifResultSortKey is what results are sorted by.
type sarifResultSortKey struct {
	uri                      string
	line                     int
	tool, unit, object, rule string
}

// sarifResultProps is a result's property bag.
type sarifResultProps struct {
	Tool    string     `json:"tool,omitempty"`
	Unit    string     `json:"unit,omitempty"`
	Object  string     `json:"object,omitempty"`
	Verdict string     `json:"verdict,omitempty"`
	Writes  int        `json:"writes,omitempty"`
	Loop    *sarifLoop `json:"loop,omitempty"`
	Fields  []string   `json:"fields,omitempty"`
}

// sarifLoop is a loop in a result's properties.
type sarifLoop struct {
	Fields        []string `json:"fields"`
	Tool          string   `json:"tool"`
	Other         string   `json:"other"`
	OtherKind     string   `json:"otherKind,omitempty"`
	PeriodSeconds float64  `json:"periodSeconds"`
	WritesPerHour float64  `json:"writesPerHour"`
}

// WriteSARIF writes the report as a SARIF 2.1.0 log: one result per
// problem (every verdict but Synced) and per Finding, with the verified fix
// as a SARIF fix when its edits are unified diffs.
func WriteSARIF(w io.Writer, r *Report, toolVersion string) error {
	rules, index := sarifRules(r)
	var results []keyedResult
	props := &sarifRunProperties{Repository: r.Repository}
	for i := range r.Runs {
		ru := &r.Runs[i]
		props.Runs = append(props.Runs, sarifRunSketch{
			Tool: ru.Tool, Unit: ru.UnitLabel(), Settings: ru.Settings,
			WindowSeconds: ru.Window.Seconds(), SimulatedSeconds: ru.Simulated.Seconds(),
			Objects: len(ru.Objects),
		})
		for j := range ru.Objects {
			o := &ru.Objects[j]
			if !o.Problem() {
				continue
			}
			results = append(results, sarifObjectResult(ru, o, index))
		}
	}
	for _, f := range r.Findings {
		results = append(results, sarifFindingResult(f, index))
	}
	slices.SortStableFunc(results, func(a, b keyedResult) int {
		ka, kb := a.key, b.key
		// Results with a file first, by file and line.
		if c := cmp.Compare(boolRank(ka.uri == ""), boolRank(kb.uri == "")); c != 0 {
			return c
		}
		return cmp.Or(
			cmp.Compare(ka.uri, kb.uri),
			cmp.Compare(ka.line, kb.line),
			cmp.Compare(ka.tool, kb.tool),
			cmp.Compare(ka.unit, kb.unit),
			cmp.Compare(ka.object, kb.object),
			cmp.Compare(ka.rule, kb.rule),
			cmp.Compare(a.Message.Text, b.Message.Text),
		)
	})
	run := sarif.Run{
		Tool: sarif.Tool{Driver: sarif.Driver{
			Name:           "truce",
			Version:        toolVersion,
			InformationURI: "https://github.com/truce-dev/truce",
			Rules:          rules,
		}},
		Results: make([]sarif.Result, len(results)),
	}
	for i, res := range results {
		run.Results[i] = res.Result
	}
	if props.Repository != "" || len(props.Runs) > 0 {
		run.Properties = props
	}
	return sarif.Write(w, run)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sarifRules lists the rules: every known problem verdict and the settings
// rule always, in a fixed order (so rule indexes are stable), then rules
// for verdicts this version does not know, by id.
func sarifRules(r *Report) ([]sarif.Rule, map[string]int) {
	var metas []verdictMeta
	for _, m := range verdictMetas {
		if m.Problem {
			metas = append(metas, m)
		}
	}
	metas = append(metas, settingMeta)
	known := len(metas)
	seen := map[string]bool{}
	for _, m := range metas {
		seen[m.Rule] = true
	}
	for _, run := range r.Runs {
		for _, o := range run.Objects {
			if m := metaOf(o.Verdict); o.Problem() && !seen[m.Rule] {
				seen[m.Rule] = true
				metas = append(metas, m)
			}
		}
	}
	slices.SortFunc(metas[known:], func(a, b verdictMeta) int { return cmp.Compare(a.Rule, b.Rule) })

	rules := make([]sarif.Rule, len(metas))
	index := map[string]int{}
	for i, m := range metas {
		index[m.Rule] = i
		rules[i] = sarif.Rule{
			ID:               m.Rule,
			Name:             m.Name,
			ShortDescription: sarif.Message{Text: m.Short},
			FullDescription:  &sarif.Message{Text: m.Full},
			HelpURI:          m.helpURI(),
			Help: sarif.Message{
				Text:     m.Full + " See " + m.helpURI(),
				Markdown: m.Full + "\n\nSee [docs/check.md](" + m.helpURI() + ").",
			},
			DefaultConfiguration: sarif.RuleConfig{Level: m.Level},
			Properties:           &sarif.RuleProperties{Tags: []string{"gitops", "kubernetes", "truce"}},
		}
	}
	return rules, index
}

func sarifObjectResult(run *Run, o *Object, index map[string]int) keyedResult {
	m := metaOf(o.Verdict)
	text := fmt.Sprintf("%s under %s: %s", o.Object, runTitle(run), sentence(o.Reason))
	md := fmt.Sprintf("**%s** `%s` under %s: %s", o.Verdict, o.Object, runTitle(run), sentence(o.Reason))
	if fix := fixSummary(o); fix != "" {
		text += " " + fix
		md += " " + fix
	}
	if o.Loop != nil {
		md += fmt.Sprintf("\n\nLoop on %s between `%s` and `%s` (%s): every %s, %s writes/hour.",
			codeList(o.Loop.Fields), o.Loop.Tool, o.Loop.Other, o.Loop.OtherKind,
			clockDuration(o.Loop.Period), strconv.FormatFloat(o.Loop.WritesPerHour, 'f', -1, 64))
	}

	props := &sarifResultProps{
		Tool: run.Tool, Unit: run.UnitLabel(), Object: o.Object, Verdict: string(o.Verdict), Writes: o.Writes,
	}
	for _, f := range o.Fields {
		props.Fields = append(props.Fields, f.Pointer)
	}
	if l := o.Loop; l != nil {
		props.Loop = &sarifLoop{
			Fields: l.Fields, Tool: l.Tool, Other: l.Other, OtherKind: l.OtherKind,
			PeriodSeconds: l.Period.Seconds(), WritesPerHour: l.WritesPerHour,
		}
	}
	loc, key := sarifLocationOf(o.Source, o.Object)
	key.tool, key.unit, key.object, key.rule = run.Tool, run.UnitLabel(), o.Object, m.Rule
	res := keyedResult{key: key, Result: sarif.Result{
		RuleID:    m.Rule,
		RuleIndex: index[m.Rule],
		Level:     m.Level,
		Message:   sarif.Message{Text: text, Markdown: md},
		Locations: []sarif.Location{loc},
		PartialFingerprints: map[string]string{
			sarifFingerprint: sarif.Fingerprint(run.Tool, run.UnitLabel(), o.Object, m.Rule),
		},
		Properties: props,
	}}
	if o.Fix != nil {
		if fix, ok := sarifFixOf(o.Fix); ok {
			res.Fixes = []sarif.Fix{fix}
		}
	}
	return res
}

func sarifFindingResult(f Finding, index map[string]int) keyedResult {
	loc, key := sarifLocationOf(f.Source, "")
	if loc.PhysicalLocation == nil && loc.LogicalLocations == nil {
		loc = sarif.ObjectLocation("settings")
	}
	key.rule = settingMeta.Rule
	return keyedResult{key: key, Result: sarif.Result{
		RuleID:              settingMeta.Rule,
		RuleIndex:           index[settingMeta.Rule],
		Level:               settingMeta.Level,
		Message:             sarif.Message{Text: sentence(f.Message)},
		Locations:           []sarif.Location{loc},
		PartialFingerprints: map[string]string{sarifFingerprint: sarif.Fingerprint("setting", f.Source, f.Message)},
	}}
}

// runTitle names a run for a sentence: "Argo CD (shop)".
func runTitle(run *Run) string {
	if run.UnitLabel() == "" {
		return ToolTitle(run.Tool)
	}
	return ToolTitle(run.Tool) + " (" + run.UnitLabel() + ")"
}

func codeList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, ", ")
}

// sarifLocationOf locates a manifest: its file and line, or, for an object
// not in Git, its name as a logical location (nothing when there is no
// object either).
func sarifLocationOf(source, object string) (sarif.Location, sarifResultSortKey) {
	if source == "" {
		if object == "" {
			return sarif.Location{}, sarifResultSortKey{}
		}
		return sarif.ObjectLocation(object), sarifResultSortKey{}
	}
	path, line := splitSource(source)
	return sarif.FileLocation(path, line), sarifResultSortKey{uri: sarif.ArtifactURI(path), line: line}
}

// sarifFixOf turns a fix into a SARIF fix. ok is false when an edit is not
// a unified diff truce can turn into replacements; the fix is then only
// named in the result's message.
func sarifFixOf(f *Fix) (sarif.Fix, bool) {
	if len(f.Edits) == 0 {
		return sarif.Fix{}, false
	}
	var text, md strings.Builder
	text.WriteString(sentence(f.Title))
	md.WriteString("**" + sentence(f.Title) + "**")
	if f.Description != "" {
		text.WriteString(" " + sentence(f.Description))
		md.WriteString(" " + sentence(f.Description))
	}
	if f.Verified {
		v := string(cmp.Or(f.Verdict, simulate.Synced))
		text.WriteString(" Verified: the simulation with this fix gives " + v + ".")
		md.WriteString(" Verified: the simulation with this fix gives " + v + ".")
	}
	if f.Warning != "" {
		text.WriteString(" Warning: " + sentence(f.Warning))
		md.WriteString("\n\n> **Warning:** " + sentence(f.Warning))
	}
	fix := sarif.Fix{}
	for _, e := range f.Edits {
		reps, err := replacementsOf(e)
		if err != nil {
			return sarif.Fix{}, false
		}
		fix.ArtifactChanges = append(fix.ArtifactChanges, sarif.ArtifactChange{
			ArtifactLocation: sarif.ArtifactLocation{URI: sarif.ArtifactURI(e.Path)},
			Replacements:     reps,
		})
		diff := strings.TrimRight(e.Diff, "\n")
		text.WriteString("\n\n" + diff)
		md.WriteString("\n\n`" + e.Path + "`")
		if e.New {
			md.WriteString(" (new file)")
		}
		md.WriteString(":\n\n```diff\n" + diff + "\n```")
	}
	fix.Description = sarif.Message{Text: text.String(), Markdown: md.String()}
	return fix, true
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// replacementsOf turns a unified diff into SARIF replacements: each run of
// removed and added lines becomes the deletion of those whole lines
// (start of the first to start of the line after the last) and the
// insertion of the new ones. A new file is one insertion at offset 0.
func replacementsOf(e Edit) ([]sarif.Replacement, error) {
	lines := strings.Split(strings.TrimSuffix(e.Diff, "\n"), "\n")
	var (
		reps        []sarif.Replacement
		inHunk      bool
		oldLine     int
		oldLeft     int // lines of the hunk's old side still to read
		newLeft     int
		start, dels int
		ins         []string
		pending     bool
		created     strings.Builder
		sawHunk     bool
		newFile     = e.New
	)
	flush := func() {
		if !pending {
			return
		}
		rep := sarif.Replacement{DeletedRegion: sarif.Region{
			StartLine: start, StartColumn: 1, EndLine: start + dels, EndColumn: 1,
		}}
		if len(ins) > 0 {
			rep.InsertedContent = &sarif.ArtifactContent{Text: strings.Join(ins, "\n") + "\n"}
		}
		reps = append(reps, rep)
		pending, dels, ins = false, 0, nil
	}
	for _, l := range lines {
		if m := hunkHeader.FindStringSubmatch(l); m != nil {
			if inHunk && (oldLeft != 0 || newLeft != 0) {
				return nil, fmt.Errorf("%s: hunk shorter than its header", e.Path)
			}
			flush()
			oldStart, _ := strconv.Atoi(m[1])
			oldLeft = 1
			if m[2] != "" {
				oldLeft, _ = strconv.Atoi(m[2])
			}
			newLeft = 1
			if m[4] != "" {
				newLeft, _ = strconv.Atoi(m[4])
			}
			oldLine = oldStart
			if oldLeft == 0 {
				// "-5,0": insert after line 5.
				oldLine = oldStart + 1
				if oldStart == 0 {
					newFile = true
				}
			}
			inHunk, sawHunk = true, true
			continue
		}
		if !inHunk {
			continue // headers: diff, index, ---, +++
		}
		if oldLeft == 0 && newLeft == 0 {
			// Past the hunk: trailing text, or the next file's headers.
			inHunk = false
			continue
		}
		op, body := byte(' '), ""
		if l != "" {
			op, body = l[0], l[1:]
		}
		switch op {
		case ' ':
			flush()
			oldLine++
			oldLeft--
			newLeft--
		case '-':
			if !pending {
				pending, start = true, oldLine
			}
			dels++
			oldLine++
			oldLeft--
		case '+':
			if newFile {
				created.WriteString(body + "\n")
				newLeft--
				continue
			}
			if !pending {
				pending, start = true, oldLine
			}
			ins = append(ins, body)
			newLeft--
		case '\\':
			// "\ No newline at end of file"
		default:
			return nil, fmt.Errorf("%s: unexpected diff line %q", e.Path, l)
		}
		if oldLeft < 0 || newLeft < 0 {
			return nil, fmt.Errorf("%s: hunk longer than its header", e.Path)
		}
	}
	if inHunk && (oldLeft != 0 || newLeft != 0) {
		return nil, fmt.Errorf("%s: hunk shorter than its header", e.Path)
	}
	flush()
	if !sawHunk {
		return nil, fmt.Errorf("%s: not a unified diff", e.Path)
	}
	if newFile {
		zero := 0
		return []sarif.Replacement{{
			DeletedRegion:   sarif.Region{CharOffset: &zero, CharLength: &zero},
			InsertedContent: &sarif.ArtifactContent{Text: created.String()},
		}}, nil
	}
	if len(reps) == 0 {
		return nil, fmt.Errorf("%s: diff changes nothing", e.Path)
	}
	return reps, nil
}
