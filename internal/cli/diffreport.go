package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/drift"
	treport "github.com/truce-dev/truce/report"
)

// diffReport is the output of truce diff.
type diffReport struct {
	Strategy string          `json:"strategy"`
	Objects  []*drift.Object `json:"objects"`
	// Findings are problems with the repository's settings, such as
	// ignore rules that do nothing.
	Findings []string `json:"findings"`
}

func (r *diffReport) drifted() bool {
	for _, o := range r.Objects {
		if o.Status == drift.Drifted || o.Status == drift.Missing || o.Status == drift.Rejected {
			return true
		}
	}
	return false
}

const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiCyan   = "\x1b[36m"
	ansiYellow = "\x1b[33m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

func (r *diffReport) print(w io.Writer, format string, color bool) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	for _, f := range r.Findings {
		fmt.Fprintln(w, paint(ansiYellow, "warning: "+f))
	}
	counts := map[drift.Status]int{}
	for _, o := range r.Objects {
		counts[o.Status]++
		ref := o.Kind + "/" + o.Name
		if o.Namespace != "" {
			ref = o.Kind + "/" + o.Namespace + "/" + o.Name
		}
		switch o.Status {
		case drift.InSync:
			continue
		case drift.Missing:
			fmt.Fprintf(w, "%s %s %s\n", paint(ansiGreen, "+"), paint(ansiBold, ref), paint(ansiGreen, "(not in the cluster: created on apply)"))
		case drift.Excluded:
			fmt.Fprintf(w, "  %s (excluded)\n", ref)
		case drift.Rejected:
			fmt.Fprintf(w, "%s %s %s\n", paint(ansiRed, "!"), paint(ansiBold, ref), paint(ansiRed, "(rejected)"))
		case drift.Drifted:
			fmt.Fprintf(w, "%s %s %s\n", paint(ansiYellow, "~"), paint(ansiBold, ref), paint(ansiYellow, "(drifted)"))
		case drift.Unpredictable:
			fmt.Fprintf(w, "%s %s %s\n", paint(ansiYellow, "?"), paint(ansiBold, ref), paint(ansiYellow, "(not compared)"))
		}
		if o.Source != "" {
			fmt.Fprintf(w, "  source: %s\n", o.Source)
		}
		for _, n := range o.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if o.Status != drift.Drifted {
			continue
		}
		if err := writeUnified(w, o, paint); err != nil {
			return err
		}
		for _, f := range o.Fields {
			line := fmt.Sprintf("  %s: %s -> %s", f.Pointer, show(f.Live, f.LiveAbsent), show(f.Desired, f.DesiredAbsent))
			if f.Origin != "" {
				line += "  [" + sidesOf(o.Strategy).from + " value by " + f.Origin + "]"
			}
			if f.IgnoredBy != "" {
				line += "  (ignored by " + f.IgnoredBy + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "%s: %s, %d in sync, %d drifted, %d to create, %d rejected, %d excluded",
		r.Strategy, treport.Plural(len(r.Objects), "object"), counts[drift.InSync], counts[drift.Drifted], counts[drift.Missing], counts[drift.Rejected], counts[drift.Excluded])
	if n := counts[drift.Unpredictable]; n > 0 {
		fmt.Fprintf(w, ", %d not compared (--timeout)", n)
	}
	fmt.Fprintln(w)
	return nil
}

// sides names the two sides of a diff by what they are: the predicted
// strategy compares what the offline chain would store with Git; the
// others compare the live object with what the tool would apply.
type sides struct{ from, to string }

func sidesOf(strategy string) sides {
	if strategy == (&drift.Predicted{}).Name() {
		return sides{from: "stored (predicted)", to: "git"}
	}
	return sides{from: "live", to: "desired (" + strategy + ")"}
}

// writeUnified prints a unified diff from live to desired: what applying
// Git would change.
func writeUnified(w io.Writer, o *drift.Object, paint func(code, s string) string) error {
	if o.Desired == nil && o.Live == nil {
		return nil
	}
	from, err := yaml.Marshal(o.Live)
	if err != nil {
		return err
	}
	to, err := yaml.Marshal(o.Desired)
	if err != nil {
		return err
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(from)), B: difflib.SplitLines(string(to)),
		FromFile: sidesOf(o.Strategy).from, ToFile: sidesOf(o.Strategy).to, Context: 3,
	})
	if err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
			line = paint(ansiBold, strings.TrimSuffix(line, "\n")) + "\n"
		case strings.HasPrefix(line, "+"):
			line = paint(ansiGreen, strings.TrimSuffix(line, "\n")) + "\n"
		case strings.HasPrefix(line, "-"):
			line = paint(ansiRed, strings.TrimSuffix(line, "\n")) + "\n"
		case strings.HasPrefix(line, "@@"):
			line = paint(ansiCyan, strings.TrimSuffix(line, "\n")) + "\n"
		}
		if _, err := io.WriteString(w, "  "+line); err != nil {
			return err
		}
	}
	return nil
}

func show(v any, absent bool) string {
	if absent {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
