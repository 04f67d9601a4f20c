package gitops

import (
	"github.com/truce-dev/truce/drift/ignore"
)

// Strategy is how a GitOps tool decides drift.
type Strategy string

// Strategies, named as on truce diff's command line.
const (
	// StrategyArgoLegacy is Argo CD's three-way diff of Git, the live
	// object and its last-applied-configuration.
	StrategyArgoLegacy Strategy = "argocd-legacy"
	// StrategyArgoServerSide is Argo CD's server-side diff: a server-side
	// apply dry run compared with the live object.
	StrategyArgoServerSide Strategy = "argocd-ssd"
	// StrategyFlux is kustomize-controller's server-side apply dry run.
	StrategyFlux Strategy = "flux"
)

// Unit selects the settings a Comparison is read from.
type Unit struct {
	// Tool is ignore.ArgoCD or ignore.Flux. Empty: the tool the settings
	// configure, Flux when they hold a Kustomization, else Argo CD when
	// they hold an Application (or App is set), else none (the zero
	// Comparison); truce diff's --strategy auto.
	Tool ignore.Tool
	// App is the Argo CD Application; nil selects every Application of
	// the settings for the rules and the first for the strategy (with
	// none: an Application without settings of its own, Argo CD's
	// defaults).
	App *ArgoApplication
	// Kustomization is the Flux Kustomization; nil selects every
	// Kustomization of the settings (with none: Flux's defaults).
	Kustomization *FluxKustomization
	// HelmRelease is a Flux HelmRelease; it takes the place of
	// Kustomization.
	HelmRelease *FluxHelmRelease
}

// Comparison is how a GitOps tool compares Git with the cluster for a
// unit: the diff strategy and the ignore rules, in the order the tool
// applies them.
type Comparison struct {
	// Tool is empty when the settings configure no tool.
	Tool     ignore.Tool
	Strategy Strategy
	// IncludeMutationWebhook is the Application's compare option; it
	// matters only with StrategyArgoServerSide.
	IncludeMutationWebhook bool
	Rules                  []ignore.Rule
}

// ComparisonFor turns the settings into the comparison of one unit. It is
// the one place where settings become ignore rules and a diff strategy, so
// that truce check, diff and sync agree.
//
// Argo CD: the rules are the Application's spec.ignoreDifferences (every
// Application's when u.App is nil), then every resource's
// argocd.argoproj.io/ignore-differences annotation, then argocd-cm's
// resource.customizations overrides and the status rule its
// resource.compareoptions implies (marked Implied): the order Argo CD
// applies them. The strategy is server-side diff when the Application's
// compare-options annotation or, without one, argocd-cmd-params-cm says
// so; else the legacy three-way diff.
//
// Flux: the rules are the Kustomization's spec.ignore (every
// Kustomization's when u.Kustomization is nil); the strategy is Flux's.
//
// truce sync, which applies every rule its --ignore files hold whatever
// the tool, takes the rules of Unit{Tool: ignore.Flux} followed by those
// of Unit{Tool: ignore.ArgoCD}, leaving out the Implied ones (it never
// compares status).
func (s *Settings) ComparisonFor(u Unit) Comparison {
	tool := u.Tool
	if tool == "" {
		switch {
		case len(s.Kustomizations) > 0:
			tool = ignore.Flux
		case len(s.Applications) > 0 || u.App != nil:
			tool = ignore.ArgoCD
		default:
			return Comparison{}
		}
	}
	c := Comparison{Tool: tool}
	switch tool {
	case ignore.Flux:
		c.Strategy = StrategyFlux
		if u.HelmRelease != nil {
			c.Rules = u.HelmRelease.Rules()
			break
		}
		ks := s.Kustomizations
		if u.Kustomization != nil {
			ks = []*FluxKustomization{u.Kustomization}
		}
		for _, k := range ks {
			c.Rules = append(c.Rules, k.Rules()...)
		}
	case ignore.ArgoCD:
		cfg := s.ArgoConfig
		if cfg == nil {
			cfg = DefaultArgoConfig()
		}
		apps, first := s.Applications, u.App
		if first != nil {
			apps = []*ArgoApplication{first}
		} else if len(apps) > 0 {
			first = apps[0]
		}
		c.Strategy = StrategyArgoLegacy
		if first != nil && first.ServerSideDiff(cfg) || first == nil && cfg.ServerSideDiff {
			c.Strategy = StrategyArgoServerSide
		}
		c.IncludeMutationWebhook = first != nil && first.CompareOptions.IncludeMutationWebhook
		for _, app := range apps {
			c.Rules = append(c.Rules, app.Rules()...)
		}
		c.Rules = append(c.Rules, s.ResourceRules...)
		c.Rules = append(c.Rules, cfg.Rules()...)
	}
	return c
}
