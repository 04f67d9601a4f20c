package gitops

import (
	"errors"
	"fmt"
	"strings"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

// Annotations Argo CD reads.
const (
	// AnnotationCompareOptions holds comma-separated compare options, on an
	// Application (ServerSideDiff=true|false, IncludeMutationWebhook=true)
	// or on a resource (IgnoreExtraneous).
	AnnotationCompareOptions = "argocd.argoproj.io/compare-options"
	// AnnotationIgnoreDifferences holds a resource's own ignore rule; see
	// ResourceIgnoreDifferences.
	AnnotationIgnoreDifferences = "argocd.argoproj.io/ignore-differences"
)

// Sync and compare options as Argo CD spells them; it compares whole
// strings, so "ServerSideApply=True" is not "ServerSideApply=true".
const (
	syncOptionServerSideApply          = "ServerSideApply=true"
	syncOptionRespectIgnoreDifferences = "RespectIgnoreDifferences=true"
	compareServerSideDiffTrue          = "ServerSideDiff=true"
	compareServerSideDiffFalse         = "ServerSideDiff=false"
	compareIncludeMutationWebhook      = "IncludeMutationWebhook=true"
	compareIncludeMutationWebhookOff   = "IncludeMutationWebhook=false"
	compareIgnoreExtraneous            = "IgnoreExtraneous"
)

// ArgoApplication is an argoproj.io/v1alpha1 Application.
type ArgoApplication struct {
	Source               manifest.Source
	Name, Namespace      string
	Project              string
	DestinationNamespace string
	// Paths are spec.source.path and spec.sources[].path, in order, where set.
	Paths []string
	// Sources are spec.source and spec.sources[], in order.
	Sources           []ArgoSource
	IgnoreDifferences []ArgoIgnoreDifference
	// Automated is nil when the Application syncs manually.
	Automated      *ArgoAutomated
	SyncOptions    ArgoSyncOptions
	CompareOptions ArgoCompareOptions
}

// ArgoSource is where one source of an Application comes from.
type ArgoSource struct {
	RepoURL, Chart, Path string
}

// ArgoIgnoreDifference is one spec.ignoreDifferences entry.
type ArgoIgnoreDifference struct {
	Group, Kind, Name, Namespace string
	JSONPointers                 []string
	JQPathExpressions            []string
	ManagedFieldsManagers        []string
}

// ArgoAutomated is spec.syncPolicy.automated.
type ArgoAutomated struct {
	// Enabled is false only when automated.enabled is false.
	Enabled, Prune, SelfHeal, AllowEmpty bool
}

// ArgoSyncOptions are spec.syncPolicy.syncOptions.
type ArgoSyncOptions struct {
	ServerSideApply          bool
	RespectIgnoreDifferences bool
	// Other holds the remaining options verbatim.
	Other []string
}

// ArgoCompareOptions is the Application's compare-options annotation.
type ArgoCompareOptions struct {
	// ServerSideDiff is nil when the annotation does not say; then
	// argocd-cmd-params-cm decides (see ArgoApplication.ServerSideDiff).
	ServerSideDiff         *bool
	IncludeMutationWebhook bool
	IgnoreExtraneous       bool
	Other                  []string
}

// ServerSideDiff reports whether Argo CD diffs this Application server-side:
// the controller-wide setting unless the annotation says ServerSideDiff=true
// or =false (false wins when both are written, as in the controller).
func (a *ArgoApplication) ServerSideDiff(cfg *ArgoConfig) bool {
	if a.CompareOptions.ServerSideDiff != nil {
		return *a.CompareOptions.ServerSideDiff
	}
	return cfg != nil && cfg.ServerSideDiff
}

// Rules returns the Application's ignoreDifferences as ignore rules.
func (a *ArgoApplication) Rules() []ignore.Rule {
	out := make([]ignore.Rule, 0, len(a.IgnoreDifferences))
	for i, d := range a.IgnoreDifferences {
		out = append(out, ignore.Rule{
			Tool:                  ignore.ArgoCD,
			Source:                a.Source.String(),
			Field:                 fmt.Sprintf("spec.ignoreDifferences[%d]", i),
			Target:                ignore.Target{Group: d.Group, Kind: d.Kind, Name: d.Name, Namespace: d.Namespace},
			JSONPointers:          d.JSONPointers,
			JQPathExpressions:     d.JQPathExpressions,
			ManagedFieldsManagers: d.ManagedFieldsManagers,
		})
	}
	return out
}

// ParseArgoApplication reads an Application.
func ParseArgoApplication(o Object) (*ArgoApplication, []Warning, error) {
	r := &reader{source: o.where().String()}
	m := o.Object
	app := &ArgoApplication{
		Source:               o.where(),
		Name:                 o.GetName(),
		Namespace:            o.GetNamespace(),
		Project:              r.str(m, "spec.project", "spec", "project"),
		DestinationNamespace: r.str(m, "spec.destination.namespace", "spec", "destination", "namespace"),
	}
	var warns []Warning
	addSource := func(src map[string]any, field string) {
		// Only the path is checked here, as before; repoURL and chart
		// are checked where sources are rendered (render/world).
		repoURL, _ := src["repoURL"].(string)
		chart, _ := src["chart"].(string)
		s := ArgoSource{RepoURL: repoURL, Chart: chart, Path: r.str(src, field+".path", "path")}
		app.Sources = append(app.Sources, s)
		if s.Path != "" {
			app.Paths = append(app.Paths, s.Path)
		}
	}
	if v, ok := get(m, "spec", "source"); ok {
		if src, ok := v.(map[string]any); ok {
			addSource(src, "spec.source")
		}
	}
	for i, src := range r.maps(m, "spec.sources", "spec", "sources") {
		if src != nil {
			addSource(src, fmt.Sprintf("spec.sources[%d]", i))
		}
	}
	for i, d := range r.maps(m, "spec.ignoreDifferences", "spec", "ignoreDifferences") {
		f := fmt.Sprintf("spec.ignoreDifferences[%d]", i)
		if d == nil {
			continue
		}
		idiff := ArgoIgnoreDifference{
			Group:                 r.str(d, f+".group", "group"),
			Kind:                  r.str(d, f+".kind", "kind"),
			Name:                  r.str(d, f+".name", "name"),
			Namespace:             r.str(d, f+".namespace", "namespace"),
			JSONPointers:          r.strings(d, f+".jsonPointers", "jsonPointers"),
			JQPathExpressions:     r.strings(d, f+".jqPathExpressions", "jqPathExpressions"),
			ManagedFieldsManagers: r.strings(d, f+".managedFieldsManagers", "managedFieldsManagers"),
		}
		if idiff.Kind == "" {
			r.fail(f+".kind", "kind is required (use \"*\" for every kind)")
		}
		app.IgnoreDifferences = append(app.IgnoreDifferences, idiff)
	}
	if auto := r.object(m, "spec.syncPolicy.automated", "spec", "syncPolicy", "automated"); auto != nil {
		a := &ArgoAutomated{Enabled: true}
		if v, ok := get(m, "spec", "syncPolicy", "automated", "enabled"); ok && v != nil {
			a.Enabled = r.boolean(m, "spec.syncPolicy.automated.enabled", "spec", "syncPolicy", "automated", "enabled")
		}
		a.Prune = r.boolean(m, "spec.syncPolicy.automated.prune", "spec", "syncPolicy", "automated", "prune")
		a.SelfHeal = r.boolean(m, "spec.syncPolicy.automated.selfHeal", "spec", "syncPolicy", "automated", "selfHeal")
		a.AllowEmpty = r.boolean(m, "spec.syncPolicy.automated.allowEmpty", "spec", "syncPolicy", "automated", "allowEmpty")
		app.Automated = a
	}
	for i, opt := range r.strings(m, "spec.syncPolicy.syncOptions", "spec", "syncPolicy", "syncOptions") {
		switch opt {
		case syncOptionServerSideApply:
			app.SyncOptions.ServerSideApply = true
		case syncOptionRespectIgnoreDifferences:
			app.SyncOptions.RespectIgnoreDifferences = true
		default:
			app.SyncOptions.Other = append(app.SyncOptions.Other, opt)
			if near := nearMiss(opt, syncOptionServerSideApply, syncOptionRespectIgnoreDifferences); near != "" {
				warns = append(warns, Warning{Source: o.where(), Field: fmt.Sprintf("spec.syncPolicy.syncOptions[%d]", i),
					Message: fmt.Sprintf("%q is not %q: Argo CD compares sync options as exact strings and ignores this one", opt, near)})
			}
		}
	}
	if v, ok := o.GetAnnotations()[AnnotationCompareOptions]; ok {
		var w []Warning
		app.CompareOptions, w = parseCompareOptions(o.where(), v)
		warns = append(warns, w...)
	}
	if err := errors.Join(r.err(), ruleErrors(app.Rules())); err != nil {
		return nil, warns, err
	}
	return app, warns, nil
}

// parseCompareOptions reads the compare-options annotation the way the
// controller does: split at ",", trim, compare whole strings.
func parseCompareOptions(source manifest.Source, value string) (ArgoCompareOptions, []Warning) {
	var c ArgoCompareOptions
	var warns []Warning
	field := "metadata.annotations[" + AnnotationCompareOptions + "]"
	var on, off bool
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		switch item {
		case "":
		case compareServerSideDiffTrue:
			on = true
		case compareServerSideDiffFalse:
			off = true
		case compareIncludeMutationWebhook:
			c.IncludeMutationWebhook = true
		case compareIncludeMutationWebhookOff:
			// the default
		case compareIgnoreExtraneous:
			c.IgnoreExtraneous = true
		default:
			c.Other = append(c.Other, item)
			if near := nearMiss(item, compareServerSideDiffTrue, compareServerSideDiffFalse, compareIncludeMutationWebhook, compareIgnoreExtraneous); near != "" {
				warns = append(warns, Warning{Source: source, Field: field,
					Message: fmt.Sprintf("%q is not %q: Argo CD compares options as exact strings and ignores this one", item, near)})
			}
		}
	}
	// The controller turns server-side diff on for =true and then off
	// again for =false.
	switch {
	case off:
		v := false
		c.ServerSideDiff = &v
	case on:
		v := true
		c.ServerSideDiff = &v
	}
	return c, warns
}

// nearMiss returns the option that s was probably meant to be: equal up to
// case and spaces, but not equal.
func nearMiss(s string, options ...string) string {
	norm := func(x string) string { return strings.ToLower(strings.ReplaceAll(x, " ", "")) }
	for _, o := range options {
		if s != o && norm(s) == norm(o) {
			return o
		}
	}
	return ""
}
