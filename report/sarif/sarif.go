// Package sarif is the SARIF 2.1.0 log truce writes for code scanning
// (GitHub, GitLab, Azure DevOps, IDE viewers): the part of the standard's
// model that truce fills, its encoding, and the locations and fingerprints
// every truce result uses. truce check's report (package report) and truce
// lint both write their findings with it; what a result says, and the
// property bags of each tool, are theirs.
package sarif

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"path/filepath"
	"strings"
)

// The SARIF version and the schema the log names.
const (
	Schema  = "https://json.schemastore.org/sarif-2.1.0.json"
	Version = "2.1.0"
)

// Log is a SARIF log.
type Log struct {
	Schema  string `json:"$schema"`
	Version string `json:"version"`
	Runs    []Run  `json:"runs"`
}

// Run is one run of one tool.
type Run struct {
	Tool    Tool     `json:"tool"`
	Results []Result `json:"results"`
	// Properties is the run's property bag (nil: none).
	Properties any `json:"properties,omitempty"`
}

// Tool names the tool of a run.
type Tool struct {
	Driver Driver `json:"driver"`
}

// Driver is the tool's main component and its rules.
type Driver struct {
	Name           string `json:"name"`
	Version        string `json:"version,omitempty"`
	InformationURI string `json:"informationUri"`
	Rules          []Rule `json:"rules"`
}

// Rule is one rule of the driver; results refer to it by id and index.
type Rule struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name,omitempty"`
	ShortDescription     Message         `json:"shortDescription"`
	FullDescription      *Message        `json:"fullDescription,omitempty"`
	HelpURI              string          `json:"helpUri"`
	Help                 Message         `json:"help"`
	DefaultConfiguration RuleConfig      `json:"defaultConfiguration"`
	Properties           *RuleProperties `json:"properties,omitempty"`
}

// RuleConfig is a rule's default configuration.
type RuleConfig struct {
	// Level is "error", "warning" or "note".
	Level string `json:"level"`
}

// RuleProperties is a rule's property bag.
type RuleProperties struct {
	Tags []string `json:"tags"`
}

// Message is a text with an optional Markdown form.
type Message struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

// Result is one finding.
type Result struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             Message           `json:"message"`
	Locations           []Location        `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Fixes               []Fix             `json:"fixes,omitempty"`
	// Properties is the result's property bag (nil: none).
	Properties any `json:"properties,omitempty"`
}

// Location is where a result is: a file region, or a named object.
type Location struct {
	PhysicalLocation *PhysicalLocation `json:"physicalLocation,omitempty"`
	LogicalLocations []LogicalLocation `json:"logicalLocations,omitempty"`
}

// PhysicalLocation is a file and, optionally, a region of it.
type PhysicalLocation struct {
	ArtifactLocation ArtifactLocation `json:"artifactLocation"`
	Region           *Region          `json:"region,omitempty"`
}

// ArtifactLocation names a file by URI reference.
type ArtifactLocation struct {
	URI string `json:"uri"`
}

// Region is a line region (StartLine > 0) or a character region
// (CharOffset set).
type Region struct {
	StartLine   int  `json:"startLine,omitempty"`
	StartColumn int  `json:"startColumn,omitempty"`
	EndLine     int  `json:"endLine,omitempty"`
	EndColumn   int  `json:"endColumn,omitempty"`
	CharOffset  *int `json:"charOffset,omitempty"`
	CharLength  *int `json:"charLength,omitempty"`
}

// LogicalLocation names something that is not a file.
type LogicalLocation struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// Fix is a proposed change of files.
type Fix struct {
	Description     Message          `json:"description"`
	ArtifactChanges []ArtifactChange `json:"artifactChanges"`
}

// ArtifactChange is the change of one file.
type ArtifactChange struct {
	ArtifactLocation ArtifactLocation `json:"artifactLocation"`
	Replacements     []Replacement    `json:"replacements"`
}

// Replacement replaces a region of the original file.
type Replacement struct {
	DeletedRegion   Region           `json:"deletedRegion"`
	InsertedContent *ArtifactContent `json:"insertedContent,omitempty"`
}

// ArtifactContent is inserted text.
type ArtifactContent struct {
	Text string `json:"text"`
}

// Write writes a log of runs, indented, HTML characters as they are.
func Write(w io.Writer, runs ...Run) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(Log{Schema: Schema, Version: Version, Runs: runs})
}

// FileLocation locates a result in a file, at a line when line > 0.
func FileLocation(path string, line int) Location {
	pl := &PhysicalLocation{ArtifactLocation: ArtifactLocation{URI: ArtifactURI(path)}}
	if line > 0 {
		pl.Region = &Region{StartLine: line}
	}
	return Location{PhysicalLocation: pl}
}

// ObjectLocation locates a result at an object that is in no file (a live
// object, one another writer created), named "Kind namespace/name" or
// "Kind.group namespace/name": its name is the last part.
func ObjectLocation(object string) Location {
	name := object
	if i := strings.LastIndexAny(object, " /"); i >= 0 {
		name = object[i+1:]
	}
	return Location{LogicalLocations: []LogicalLocation{{Name: name, FullyQualifiedName: object, Kind: "resource"}}}
}

// ArtifactURI turns a path into a URI reference: relative paths stay
// relative (to the repository root, where CI runs), absolute ones become
// file URIs.
func ArtifactURI(path string) string {
	p := filepath.ToSlash(path)
	if filepath.IsAbs(path) || strings.HasPrefix(p, "/") {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // C:/x
		}
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	return (&url.URL{Path: strings.TrimPrefix(p, "./")}).String()
}

// Fingerprint is a partial fingerprint of a result from what identifies it
// (not its line, so that it survives the object moving within its file).
func Fingerprint(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}
