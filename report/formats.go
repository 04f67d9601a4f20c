package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/truce-dev/truce/simulate"
)

// This file holds what the SARIF, JUnit and HTML formats share: what each
// verdict means, where an object's manifest is, and how durations read.

// docsURL is where docs/check.md is published; rules and the HTML page
// link to its sections, one per verdict.
const docsURL = "https://github.com/truce-dev/truce/blob/main/docs/check.md"

// verdictMeta describes one verdict for every output format.
type verdictMeta struct {
	Verdict simulate.Verdict
	// Rule is the SARIF rule id; Anchor the section of docs/check.md.
	Rule, Anchor string
	// Name is the SARIF rule name (PascalCase, as SARIF suggests).
	Name        string
	Short, Full string
	Level       string // SARIF level
	CSS         string // HTML class of the badge
	Problem     bool   // needs attention (every verdict but Synced)
	Skipped     bool   // JUnit skipped rather than failed
}

// verdictMetas lists the verdicts in the order summaries show them (the
// text output's order).
var verdictMetas = []verdictMeta{
	{
		Verdict: simulate.Loop, Rule: "truce/loop", Anchor: "loop", Name: "WriteLoop",
		Short: "The GitOps tool and another writer keep rewriting the same fields.",
		Full: "The GitOps tool applies the value from Git, another writer (an admission step " +
			"or a controller) changes it back, the tool sees drift and applies again, forever. " +
			"Every round is a write to the API server and an OutOfSync flap.",
		Level: "error", CSS: "loop", Problem: true,
	},
	{
		Verdict: simulate.OutOfSync, Rule: "truce/out-of-sync", Anchor: "outofsync", Name: "PermanentlyOutOfSync",
		Short: "The object stays OutOfSync: a false difference that hides real drift.",
		Full: "What is stored differs from Git in a way the GitOps tool reports as drift but " +
			"does not correct (no self-heal), so the object is OutOfSync forever and real " +
			"drift in the same object goes unnoticed.",
		Level: "error", CSS: "outofsync", Problem: true,
	},
	{
		Verdict: simulate.Rejected, Rule: "truce/rejected", Anchor: "rejected", Name: "AdmissionRejected",
		Short: "Admission denies the manifest: the GitOps tool can never apply it.",
		Full: "The API server's admission chain (validation, ValidatingAdmissionPolicies, " +
			"webhooks, Pod Security) rejects the write the GitOps tool makes for this manifest, " +
			"so the object never reaches the cluster in the state Git describes.",
		Level: "error", CSS: "rejected", Problem: true,
	},
	{
		Verdict: simulate.Pruned, Rule: "truce/pruned", Anchor: "pruned", Name: "PrunedByGitOps",
		Short: "An object another writer generated is deleted by the GitOps tool's prune.",
		Full: "The object is not in Git but carries the GitOps tool's tracking label or " +
			"annotation (copied by a generator), so the tool believes it owns it and prunes it; " +
			"the generator creates it again.",
		Level: "error", CSS: "pruned", Problem: true,
	},
	{
		Verdict: simulate.Unpredictable, Rule: "truce/unpredictable", Anchor: "unpredictable", Name: "UnpredictableWebhook",
		Short: "A webhook in the write path could not be called offline.",
		Full: "What the API server would store depends on an admission webhook truce could not " +
			"call, so the verdict for this object is not known. Tell truce where the webhook's " +
			"service is reachable (--webhook-endpoint) to include it.",
		Level: "warning", CSS: "unpredictable", Problem: true, Skipped: true,
	},
	{
		Verdict: simulate.Synced, Anchor: "synced", CSS: "synced",
	},
}

// settingMeta is the rule for Findings.
var settingMeta = verdictMeta{
	Verdict: "Setting", Rule: "truce/setting", Anchor: "settings", Name: "IneffectiveSetting",
	Short: "A GitOps setting has no effect.",
	Full: "An ignore rule that matches nothing, or an option that the tool ignores in this " +
		"configuration: it does not do what its author meant, and may hide that something else is needed.",
	Level: "warning", CSS: "setting",
}

// metaOf returns what is known about a verdict; an unknown verdict is a
// problem reported as a note.
func metaOf(verdict simulate.Verdict) verdictMeta {
	for _, m := range verdictMetas {
		if m.Verdict == verdict {
			return m
		}
	}
	name := string(verdict)
	slug := kebab(name)
	return verdictMeta{
		Verdict: verdict, Rule: "truce/" + slug, Anchor: strings.ReplaceAll(slug, "-", ""), Name: name,
		Short: name + ".", Full: "Verdict " + name + ".",
		Level: "note", CSS: "other", Problem: true,
	}
}

// helpURI links a verdict's section of docs/check.md.
func (m verdictMeta) helpURI() string { return docsURL + "#" + m.Anchor }

// kebab turns "OutOfSync" into "out-of-sync".
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r - 'A' + 'a')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// splitSource splits "path/to/file.yaml:12" into the path and the line (0
// when there is none).
func splitSource(src string) (path string, line int) {
	i := strings.LastIndexByte(src, ':')
	if i <= 0 {
		return src, 0
	}
	n, err := strconv.Atoi(src[i+1:])
	if err != nil || n <= 0 {
		return src, 0
	}
	return src[:i], n
}

// clockDuration prints a duration the way the timeline reads: "0s", "8s",
// "4m02s", "1h05m".
func clockDuration(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return neg + strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		s := d.Seconds()
		if d%time.Second == 0 {
			return fmt.Sprintf("%s%ds", neg, int(s))
		}
		return fmt.Sprintf("%s%.1fs", neg, s)
	case d < time.Hour:
		d = d.Round(time.Second)
		m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
		if s == 0 {
			return fmt.Sprintf("%s%dm", neg, m)
		}
		return fmt.Sprintf("%s%dm%02ds", neg, m, s)
	default:
		d = d.Round(time.Minute)
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%s%dh", neg, h)
		}
		return fmt.Sprintf("%s%dh%02dm", neg, h, m)
	}
}

// ToolTitle is how people write the GitOps tool's name ("Argo CD" for
// "argocd").
func ToolTitle(tool string) string {
	switch strings.ToLower(tool) {
	case "argocd", "argo", "argo-cd":
		return "Argo CD"
	case "flux", "fluxcd":
		return "Flux"
	}
	return tool
}

// runName names a run: "argocd shop", or "flux" for the tool's defaults.
func runName(run *Run) string {
	if run.UnitLabel() == "" {
		return run.Tool
	}
	return run.Tool + " " + run.UnitLabel()
}

// sentence ends s with a full stop unless it already ends a sentence.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	switch s[len(s)-1] {
	case '.', '!', '?', ':':
		return s
	}
	return s + "."
}

// fixSummary is the sentence that names the fix for a problem.
func fixSummary(o *Object) string {
	switch {
	case o.Fix != nil && o.Fix.Verified:
		return "Fix: " + sentence(o.Fix.Title)
	case o.Fix != nil:
		return "Fix (not verified): " + sentence(o.Fix.Title)
	case len(o.Alternatives) > 0:
		titles := make([]string, len(o.Alternatives))
		for i, a := range o.Alternatives {
			titles[i] = a.Title
		}
		return "No verified fix; candidates: " + sentence(strings.Join(titles, "; "))
	}
	return ""
}
