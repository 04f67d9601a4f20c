package report

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/truce-dev/truce/simulate"
)

// JUnit XML, as CI test views (GitLab, Jenkins, GitHub test reporters,
// Azure DevOps) read it: one testsuite per simulation, one testcase per
// object; problems fail, Unpredictable objects are skipped.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
}

type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      string        `xml:"line,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitFailure `xml:"skipped,omitempty"`
	SystemOut *junitCDATA   `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",cdata"`
}

type junitCDATA struct {
	Body string `xml:",cdata"`
}

// WriteJUnit writes the report as JUnit XML.
func WriteJUnit(w io.Writer, r *Report) error {
	out := junitSuites{Name: "truce check", Time: "0"}
	if r.Repository != "" {
		out.Name = "truce check " + r.Repository
	}
	for i := range r.Runs {
		run := &r.Runs[i]
		s := junitSuite{Name: runName(run), Time: "0"}
		s.Properties = &junitProperties{Property: []junitProperty{
			{Name: "tool", Value: run.Tool},
			{Name: "unit", Value: run.UnitLabel()},
			{Name: "settings", Value: xmlText(run.Settings)},
			{Name: "window", Value: run.Window.String()},
			{Name: "simulated", Value: run.Simulated.String()},
		}}
		classname := run.Tool
		if run.UnitLabel() != "" {
			classname += "/" + run.UnitLabel()
		}
		for j := range run.Objects {
			o := &run.Objects[j]
			c := junitCase{Name: xmlText(o.Object), Classname: xmlText(classname), Time: "0"}
			if path, line := splitSource(o.Source); path != "" {
				c.File = xmlText(path)
				if line > 0 {
					c.Line = strconv.Itoa(line)
				}
			}
			s.Tests++
			m := metaOf(o.Verdict)
			switch {
			case !o.Problem():
			case m.Skipped:
				s.Skipped++
				c.Skipped = &junitFailure{Message: xmlText(o.Reason), Body: xmlText(junitDetails(run, o))}
			default:
				s.Failures++
				c.Failure = &junitFailure{Message: xmlText(o.Reason), Type: xmlText(string(o.Verdict)), Body: xmlText(junitDetails(run, o))}
			}
			s.Cases = append(s.Cases, c)
		}
		out.Suites = append(out.Suites, s)
	}
	if len(r.Findings) > 0 {
		// Findings do not fail the check (its exit status); they are
		// passing tests whose output says what is wrong.
		s := junitSuite{Name: "settings", Time: "0"}
		for _, f := range r.Findings {
			c := junitCase{Name: xmlText(f.Message), Classname: "settings", Time: "0",
				SystemOut: &junitCDATA{Body: xmlText("warning: " + sentence(f.Message) + "\n")}}
			if path, line := splitSource(f.Source); path != "" {
				c.File = xmlText(path)
				if line > 0 {
					c.Line = strconv.Itoa(line)
				}
				c.Name = xmlText(f.Source + ": " + f.Message)
			}
			s.Tests++
			s.Cases = append(s.Cases, c)
		}
		out.Suites = append(out.Suites, s)
	}
	for _, s := range out.Suites {
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Skipped += s.Skipped
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// junitDetails is the body of a failure: the loop, the fields, the
// timeline and the fix, as plain text.
func junitDetails(run *Run, o *Object) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s under %s", o.Verdict, o.Object, runTitle(run))
	if o.Source != "" {
		fmt.Fprintf(&b, " (%s)", o.Source)
	}
	fmt.Fprintf(&b, "\n%s\n", sentence(o.Reason))
	if l := o.Loop; l != nil {
		b.WriteString("\nLoop\n")
		if len(l.Fields) > 0 {
			fmt.Fprintf(&b, "  fields:  %s\n", strings.Join(l.Fields, ", "))
		}
		fmt.Fprintf(&b, "  writers: %s (GitOps tool) and %s (%s)\n  period:  %s, %s writes/hour\n",
			l.Tool, l.Other, l.OtherKind, clockDuration(l.Period), strconv.FormatFloat(l.WritesPerHour, 'f', -1, 64))
	}
	if len(o.Fields) > 0 {
		b.WriteString("\nDifferences\n")
		for _, f := range o.Fields {
			fmt.Fprintf(&b, "  %s: Git %s, live %s", f.Pointer, quoteOrNone(f.Desired), quoteOrNone(f.Live))
			if f.Origin != "" {
				fmt.Fprintf(&b, " (written by %s)", f.Origin)
			}
			if f.IgnoredBy != "" {
				fmt.Fprintf(&b, " [ignored by %s]", f.IgnoredBy)
			}
			b.WriteByte('\n')
		}
	}
	if len(o.Timeline) > 0 {
		fmt.Fprintf(&b, "\nTimeline (%s", Plural(len(o.Timeline), "write"))
		if run.Simulated > 0 && run.Simulated < run.Window {
			fmt.Fprintf(&b, ", simulated over %s", clockDuration(run.Simulated))
		}
		if o.Writes != len(o.Timeline) {
			fmt.Fprintf(&b, "; %d in the %s window", o.Writes, clockDuration(run.Window))
		}
		b.WriteString(")\n")
		for _, e := range o.Timeline {
			who := e.Writer
			if e.ByTool {
				who += " [tool]"
			}
			fmt.Fprintf(&b, "  %7s  %-30s %s", "+"+clockDuration(e.At), who, e.Verb)
			switch {
			case e.Error != "":
				fmt.Fprintf(&b, "  ERROR %s", e.Error)
			case len(e.Changes) == 0:
				b.WriteString("  (stored unchanged)")
			}
			b.WriteByte('\n')
			for _, c := range e.Changes {
				fmt.Fprintf(&b, "  %7s    %s\n", "", c)
			}
			for _, a := range e.Admission {
				fmt.Fprintf(&b, "  %7s    admission: %s\n", "", a)
			}
		}
	}
	if o.Fix != nil {
		b.WriteString("\n")
		writeFixText(&b, "Fix", o.Fix)
	}
	if len(o.Alternatives) > 0 {
		b.WriteString("\nAlternatives\n")
		for _, a := range o.Alternatives {
			state := "not verified"
			if a.Verified {
				state = "verified"
			}
			fmt.Fprintf(&b, "  - %s (%s, %s)\n", a.Title, a.Kind, state)
		}
	}
	return b.String()
}

func writeFixText(b *strings.Builder, label string, f *Fix) {
	state := "not verified"
	if f.Verified {
		state = "verified: " + string(cmp.Or(f.Verdict, simulate.Synced))
	}
	fmt.Fprintf(b, "%s (%s, %s): %s\n", label, f.Kind, state, f.Title)
	if f.Description != "" {
		fmt.Fprintf(b, "  %s\n", f.Description)
	}
	if f.Warning != "" {
		fmt.Fprintf(b, "  Warning: %s\n", f.Warning)
	}
	for _, e := range f.Edits {
		if e.New {
			fmt.Fprintf(b, "  new file %s\n", e.Path)
		}
		for _, l := range strings.Split(strings.TrimRight(e.Diff, "\n"), "\n") {
			fmt.Fprintf(b, "    %s\n", l)
		}
	}
}

// Plural says "1 write", "2 writes".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return strconv.Quote(s)
}

// xmlText replaces what XML 1.0 cannot carry (control characters, invalid
// UTF-8) with U+FFFD: encoding/xml writes CDATA sections as they are.
func xmlText(s string) string {
	ok := true
	for _, r := range s {
		if !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !xmlChar(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF && r != utf8.RuneError ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
