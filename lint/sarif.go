package lint

import (
	"io"
	"strings"

	"github.com/truce-dev/truce/report/sarif"
)

// SARIF 2.1.0 as code scanning reads it (GitHub, GitLab, IDE viewers): one
// run, a rule per lint rule with its documentation as help, a result per
// finding located at its file and line, or at the live object's name. The
// model and encoding are report/sarif's, shared with truce check.

const (
	sarifFingerprint = "truceLint/v1"
	// DocsURL is where every rule is documented, with an anchor per rule id.
	DocsURL = "https://github.com/truce-dev/truce/blob/main/docs/lint.md"
)

// sarifProperties is a result's property bag.
type sarifProperties struct {
	Object string `json:"object"`
	Why    string `json:"why"`
	Fix    string `json:"fix"`
}

// sarifLevel maps a severity to a SARIF level.
func sarifLevel(s Severity) string {
	switch s {
	case SeverityError:
		return "error"
	case SeverityWarning:
		return "warning"
	}
	return "note"
}

// WriteSARIF writes findings as a SARIF 2.1.0 log. rules are the rules that
// ran (their order is the rule index); a finding of a rule not among them
// gets a rule entry of its own.
func WriteSARIF(w io.Writer, findings []Finding, rules []Rule, toolVersion string) error {
	driver := sarif.Driver{Name: "truce lint", Version: toolVersion, InformationURI: "https://github.com/truce-dev/truce", Rules: []sarif.Rule{}}
	index := map[string]int{}
	addRule := func(id string, sev Severity, summary string) {
		index[id] = len(driver.Rules)
		help := DocsURL + "#" + id
		driver.Rules = append(driver.Rules, sarif.Rule{
			ID:                   id,
			ShortDescription:     sarif.Message{Text: summary},
			HelpURI:              help,
			Help:                 sarif.Message{Text: summary + ". See " + help, Markdown: summary + ".\n\nSee [docs/lint.md](" + help + ")."},
			DefaultConfiguration: sarif.RuleConfig{Level: sarifLevel(sev)},
		})
	}
	for _, r := range rules {
		addRule(r.ID, r.Severity, r.Summary)
	}
	run := sarif.Run{Results: []sarif.Result{}}
	for _, f := range findings {
		if _, ok := index[f.Rule]; !ok {
			addRule(f.Rule, f.Severity, f.Rule)
		}
		run.Results = append(run.Results, sarif.Result{
			RuleID:    f.Rule,
			RuleIndex: index[f.Rule],
			Level:     sarifLevel(f.Severity),
			Message: sarif.Message{
				Text:     sentence(f.Object+": "+f.Message) + " Fix: " + f.Fix,
				Markdown: "`" + f.Object + "`: " + sentence(f.Message) + "\n\n" + f.Why + "\n\n**Fix:** " + f.Fix,
			},
			Locations: []sarif.Location{sarifLocationOf(f)},
			PartialFingerprints: map[string]string{
				sarifFingerprint: sarif.Fingerprint(f.Rule, f.Object, f.Message),
			},
			Properties: sarifProperties{Object: f.Object, Why: f.Why, Fix: f.Fix},
		})
	}
	run.Tool = sarif.Tool{Driver: driver}
	return sarif.Write(w, run)
}

// sarifLocationOf locates a finding at its file and line, or names the
// live object.
func sarifLocationOf(f Finding) sarif.Location {
	if f.Source == "" {
		return sarif.ObjectLocation(f.Object)
	}
	file, line := SplitSource(f.Source)
	if i := strings.Index(file, " (kustomization "); i >= 0 {
		file = file[:i]
	}
	return sarif.FileLocation(file, line)
}

// sentence ends s with a period unless it ends with punctuation already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}
