package lint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"path/filepath"
	"strings"
)

// SARIF 2.1.0 as code scanning reads it (GitHub, GitLab, IDE viewers): one
// run, a rule per lint rule with its documentation as help, a result per
// finding located at its file and line, or at the live object's name.
// report.WriteSARIF serves truce check's report model; its types are not
// exported, and lint's model is simpler, so this is a small writer of its own.

const (
	sarifSchema      = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion     = "2.1.0"
	sarifFingerprint = "truceLint/v1"
	// DocsURL is where every rule is documented, with an anchor per rule id.
	DocsURL = "https://github.com/truce-dev/truce/blob/main/docs/lint.md"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string          `json:"id"`
	ShortDescription     sarifMessage    `json:"shortDescription"`
	HelpURI              string          `json:"helpUri"`
	Help                 sarifMessage    `json:"help"`
	DefaultConfiguration sarifRuleConfig `json:"defaultConfiguration"`
}

type sarifRuleConfig struct {
	Level string `json:"level"`
}

type sarifMessage struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             sarifMessage      `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Properties          sarifProperties   `json:"properties"`
}

type sarifProperties struct {
	Object string `json:"object"`
	Why    string `json:"why"`
	Fix    string `json:"fix"`
}

type sarifLocation struct {
	PhysicalLocation *sarifPhysicalLocation `json:"physicalLocation,omitempty"`
	LogicalLocations []sarifLogicalLocation `json:"logicalLocations,omitempty"`
}

type sarifPhysicalLocation struct {
	ArtifactLocation sarifArtifactLocation `json:"artifactLocation"`
	Region           *sarifRegion          `json:"region,omitempty"`
}

type sarifArtifactLocation struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifLogicalLocation struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
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
	driver := sarifDriver{Name: "truce lint", Version: toolVersion, InformationURI: "https://github.com/truce-dev/truce", Rules: []sarifRule{}}
	index := map[string]int{}
	addRule := func(id string, sev Severity, summary string) {
		index[id] = len(driver.Rules)
		help := DocsURL + "#" + id
		driver.Rules = append(driver.Rules, sarifRule{
			ID:                   id,
			ShortDescription:     sarifMessage{Text: summary},
			HelpURI:              help,
			Help:                 sarifMessage{Text: summary + ". See " + help, Markdown: summary + ".\n\nSee [docs/lint.md](" + help + ")."},
			DefaultConfiguration: sarifRuleConfig{Level: sarifLevel(sev)},
		})
	}
	for _, r := range rules {
		addRule(r.ID, r.Severity, r.Summary)
	}
	run := sarifRun{Results: []sarifResult{}}
	for _, f := range findings {
		if _, ok := index[f.Rule]; !ok {
			addRule(f.Rule, f.Severity, f.Rule)
		}
		run.Results = append(run.Results, sarifResult{
			RuleID:    f.Rule,
			RuleIndex: index[f.Rule],
			Level:     sarifLevel(f.Severity),
			Message: sarifMessage{
				Text:     sentence(f.Object+": "+f.Message) + " Fix: " + f.Fix,
				Markdown: "`" + f.Object + "`: " + sentence(f.Message) + "\n\n" + f.Why + "\n\n**Fix:** " + f.Fix,
			},
			Locations: []sarifLocation{sarifLocationOf(f)},
			PartialFingerprints: map[string]string{
				sarifFingerprint: fingerprint(f.Rule, f.Object, f.Message),
			},
			Properties: sarifProperties{Object: f.Object, Why: f.Why, Fix: f.Fix},
		})
	}
	run.Tool = sarifTool{Driver: driver}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}})
}

// sarifLocationOf locates a finding at its file and line, or names the
// live object.
func sarifLocationOf(f Finding) sarifLocation {
	if f.Source == "" {
		name := f.Object
		if i := strings.LastIndexAny(name, " /"); i >= 0 {
			name = name[i+1:]
		}
		return sarifLocation{LogicalLocations: []sarifLogicalLocation{{Name: name, FullyQualifiedName: f.Object, Kind: "resource"}}}
	}
	file, line := SplitSource(f.Source)
	if i := strings.Index(file, " (kustomization "); i >= 0 {
		file = file[:i]
	}
	pl := &sarifPhysicalLocation{ArtifactLocation: sarifArtifactLocation{URI: sourceURI(file)}}
	if line > 0 {
		pl.Region = &sarifRegion{StartLine: line}
	}
	return sarifLocation{PhysicalLocation: pl}
}

// sourceURI turns a path into a URI reference: relative paths stay
// relative (to the repository root, where CI runs), absolute ones become
// file URIs.
func sourceURI(path string) string {
	p := filepath.ToSlash(path)
	if filepath.IsAbs(path) || strings.HasPrefix(p, "/") {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // C:/x
		}
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	return (&url.URL{Path: strings.TrimPrefix(p, "./")}).String()
}

func fingerprint(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

// sentence ends s with a period unless it ends with punctuation already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}
