package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText writes one block per finding,
//
//	SOURCE: SEVERITY RULE: MESSAGE
//	    object: OBJECT
//	    why: WHY
//	    fix: FIX
//
// (SOURCE is "OBJECT (live)" for a live object), then a count.
func WriteText(w io.Writer, findings []Finding) error {
	var b strings.Builder
	counts := map[Severity]int{}
	for _, f := range findings {
		counts[f.Severity]++
		src := f.Source
		if src == "" {
			src = f.Object + " (live)"
		}
		fmt.Fprintf(&b, "%s: %s %s: %s\n", src, f.Severity, f.Rule, f.Message)
		if f.Source != "" {
			fmt.Fprintf(&b, "    object: %s\n", f.Object)
		}
		fmt.Fprintf(&b, "    why: %s\n", f.Why)
		fmt.Fprintf(&b, "    fix: %s\n", f.Fix)
	}
	if len(findings) == 0 {
		b.WriteString("no findings\n")
	} else {
		var parts []string
		for _, s := range []Severity{SeverityError, SeverityWarning, SeverityInfo} {
			if n := counts[s]; n > 0 {
				parts = append(parts, plural(n, string(s)))
			}
		}
		fmt.Fprintf(&b, "\n%s: %s\n", plural(len(findings), "finding"), strings.Join(parts, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// JSONReport is the --format json document: {"findings": [...]}, never
// null.
type JSONReport struct {
	Findings []Finding `json:"findings"`
}

// WriteJSON writes the findings as a JSONReport.
func WriteJSON(w io.Writer, findings []Finding) error {
	if findings == nil {
		findings = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(JSONReport{Findings: findings})
}
