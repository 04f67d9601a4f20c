// Package lint finds the known hazards of admission configurations and
// GitOps settings before they break: a fail-closed webhook that can block
// its own restart, webhooks on the control plane's write path, timeouts the
// write path cannot afford, policies that do nothing, Argo CD ignore rules
// that ignore nothing.
//
// Each Rule has a stable ID and a severity and reports Findings that say
// where (file:line, or the live object), what, why and how to fix it.
// docs/lint.md documents every rule with a bad and a good example; the same
// examples are the rules' tests (testdata/<rule-id>/{bad,good}.yaml).
package lint

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// Severity is how bad a Finding is.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Rank orders severities: info 1, warning 2, error 3, anything else 0.
func (s Severity) Rank() int {
	switch s {
	case SeverityError:
		return 3
	case SeverityWarning:
		return 2
	case SeverityInfo:
		return 1
	}
	return 0
}

// ParseSeverity reads "error", "warning" or "info".
func ParseSeverity(s string) (Severity, error) {
	switch v := Severity(s); v {
	case SeverityError, SeverityWarning, SeverityInfo:
		return v, nil
	}
	return "", fmt.Errorf("unknown severity %q (want error, warning or info)", s)
}

// Finding is one hazard in one object.
type Finding struct {
	// Rule is the stable id of the rule that found it.
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Source is "file:line" of the object, or "" for a live object.
	Source string `json:"source"`
	// Object is "Kind namespace/name" or "Kind name".
	Object string `json:"object"`
	// Message says what is wrong, naming the webhook, field or value.
	Message string `json:"message"`
	// Why says why it matters.
	Why string `json:"why"`
	// Fix says what to change.
	Fix string `json:"fix"`
	// Pointer is the ignore rule's JSON pointer the finding is about (an
	// Argo CD jsonPointers entry), as written; "" for the other rules.
	Pointer string `json:"pointer,omitempty"`
}

// LiveSource is the Source.File of objects read from a live cluster. Their
// findings have an empty Source.
const LiveSource = "live"

// Input is what the rules look at.
type Input struct {
	// Objects is everything found in the paths and, with a kubeconfig, in
	// the live cluster (with Source.File LiveSource).
	Objects []manifest.Object

	// options is set by Run for the rules that have settings.
	options Options
	// shared memoises work several rules need (the compiled mutating
	// policies); Run sets it and releases it when the rules are done.
	shared *shared
	// cache keeps the policies compiled by one Run's chains (one per
	// policy, and one per rule that runs admission); nil outside Run.
	cache *admission.Cache
}

// chainOptions are the options of the chains the rules build: a webhook's
// (the policy plugins alone), sharing the Run's compiled policies.
func (in *Input) chainOptions() admission.Options {
	opts := admission.WebhookOptions()
	opts.Cache = in.cache
	return opts
}

// Rule is one check.
type Rule struct {
	// ID is stable across releases: --disable and CI suppressions use it.
	ID string
	// Severity is the rule's severity. A few rules report some findings one
	// level lower (docs/lint.md says which); never higher.
	Severity Severity
	// Summary is one line for listings and SARIF.
	Summary string
	Check   func(ctx context.Context, in *Input) ([]Finding, error)
}

// DefaultMaxWebhookTimeout is the timeout above which a webhook, or a chain
// of mutating webhooks called one after another, is reported.
const DefaultMaxWebhookTimeout = 5 * time.Second

// Options configure Run.
type Options struct {
	// Disable lists rule ids not to run.
	Disable []string
	// MaxWebhookTimeout is what the write path can afford to wait for
	// webhooks; 0 means DefaultMaxWebhookTimeout.
	MaxWebhookTimeout time.Duration
	// Simulator runs the GitOps tools for the loop rule; without one that
	// rule reports that it could not simulate (when there is something to
	// simulate).
	Simulator Simulator
}

func (o Options) maxWebhookTimeout() time.Duration {
	if o.MaxWebhookTimeout <= 0 {
		return DefaultMaxWebhookTimeout
	}
	return o.MaxWebhookTimeout
}

// Rules returns every rule, sorted by ID.
func Rules() []Rule {
	var out []Rule
	out = append(out, webhookRules()...)
	out = append(out, policyRules()...)
	out = append(out, argoRules()...)
	out = append(out, extraRules()...)
	slices.SortFunc(out, func(a, b Rule) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Run runs the enabled rules on in and returns their findings sorted by
// source (file, then line; live objects last), rule, object and message.
// An unknown id in opts.Disable is an error, so that a typo does not
// silently keep a rule on.
func Run(ctx context.Context, in *Input, opts Options) ([]Finding, error) {
	rules := Rules()
	known := make(map[string]bool, len(rules))
	for _, r := range rules {
		known[r.ID] = true
	}
	disabled := map[string]bool{}
	for _, id := range opts.Disable {
		if !known[id] {
			return nil, fmt.Errorf("unknown rule %q in --disable (known: %s)", id, strings.Join(ruleIDs(rules), ", "))
		}
		disabled[id] = true
	}
	withOpts := *in
	withOpts.options = opts
	withOpts.shared = &shared{}
	withOpts.cache = admission.NewCache(0)
	defer withOpts.shared.release()
	findings := []Finding{}
	for _, r := range rules {
		if disabled[r.ID] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fs, err := r.Check(ctx, &withOpts)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", r.ID, err)
		}
		for _, f := range fs {
			f.Rule = cmp.Or(f.Rule, r.ID)
			f.Severity = cmp.Or(f.Severity, r.Severity)
			findings = append(findings, f)
		}
	}
	SortFindings(findings)
	return findings, nil
}

func ruleIDs(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.ID
	}
	return out
}

// SortFindings sorts findings by source (file, then line as a number; live
// objects last), rule, object and message.
func SortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if c := cmp.Compare(boolRank(a.Source == ""), boolRank(b.Source == "")); c != 0 {
			return c
		}
		af, al := SplitSource(a.Source)
		bf, bl := SplitSource(b.Source)
		return cmp.Or(
			cmp.Compare(af, bf),
			cmp.Compare(al, bl),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Object, b.Object),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SplitSource splits "file:line" into the file and the line (0 when there
// is none). A kustomization suffix (" (kustomization K)") stays with the
// file.
func SplitSource(src string) (file string, line int) {
	base, suffix := src, ""
	if i := strings.Index(src, " (kustomization "); i >= 0 {
		base, suffix = src[:i], src[i:]
	}
	i := strings.LastIndexByte(base, ':')
	if i <= 0 {
		return src, 0
	}
	n, err := strconv.Atoi(base[i+1:])
	if err != nil || n <= 0 {
		return src, 0
	}
	return base[:i] + suffix, n
}

// sourceOf is where a finding about o points: its file:line, or "" for a
// live object.
func sourceOf(o manifest.Object) string {
	if o.Source.File == LiveSource {
		return ""
	}
	return o.Source.String()
}

// objectName names an object as "Kind namespace/name" or "Kind name".
func objectName(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// finding starts a Finding about o.
func finding(o manifest.Object, msg, why, fix string) Finding {
	return Finding{Source: sourceOf(o), Object: objectName(o.Object), Message: msg, Why: why, Fix: fix}
}

// where names o for an error message: its source, or its name when live.
func where(o manifest.Object) string {
	if s := sourceOf(o); s != "" {
		return s
	}
	return objectName(o.Object) + " (live)"
}

// WithLive returns the objects of the files followed by the live objects
// that no file object shadows (same group, kind, namespace and name): the
// files are what is about to be applied, so their version is linted.
func WithLive(files, live []manifest.Object) []manifest.Object {
	type key struct{ group, kind, namespace, name string }
	keyOf := func(o manifest.Object) key {
		gvk := o.Object.GroupVersionKind()
		return key{gvk.Group, gvk.Kind, o.Object.GetNamespace(), o.Object.GetName()}
	}
	inFiles := make(map[key]bool, len(files))
	for _, o := range files {
		inFiles[keyOf(o)] = true
	}
	out := append([]manifest.Object{}, files...)
	for _, o := range live {
		if !inFiles[keyOf(o)] {
			out = append(out, o)
		}
	}
	return out
}

// isKind reports whether o is a group/kind (any version).
func isKind(o manifest.Object, group, kind string) bool {
	gvk := o.Object.GroupVersionKind()
	return gvk.Group == group && gvk.Kind == kind
}
