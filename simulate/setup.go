package simulate

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/flux"
)

// Setup is one simulation to run: a GitOps tool with its settings, and the
// manifests it reconciles. Build makes a fresh tool, since a tool keeps
// state (its backoff, its comparisons) during a run.
type Setup struct {
	// Tool is "argocd" or "flux"; Unit names the Application or
	// Kustomization ("" for the tool's defaults when the repository has no
	// settings for it).
	Tool, Unit string
	// Source is where the unit is defined, zero for defaults.
	Source  manifest.Source
	Desired []Desired
	build   func(desired []Desired, kinds []schema.GroupVersionKind) (Tool, error)
}

// Build returns a fresh tool for desired (the setup's own manifests, or a
// subset), looking for prune candidates in kinds besides Git's.
func (s *Setup) Build(desired []Desired, kinds []schema.GroupVersionKind) (Tool, error) {
	return s.build(desired, kinds)
}

// Setups derives the simulations from the repository's settings: one per
// Argo CD Application and Flux Kustomization, each with the manifests under
// its path (all manifests when paths do not separate them). A repository
// without GitOps settings gets both tools with their defaults: Argo CD
// with automated sync, self-heal and prune, and Flux every 10 minutes. The
// diff strategy and ignore rules of each are gitops.Settings.ComparisonFor's.
func Setups(s *gitops.Settings, desired []Desired) ([]*Setup, error) {
	var out []*Setup
	if s == nil {
		s = &gitops.Settings{}
	}
	byUnit := rendered(desired)
	for _, app := range s.Applications {
		mine := under(desired, app.Paths, len(s.Applications))
		if byUnit != nil {
			mine = byUnit[manifest.Unit{Kind: "Application", Namespace: app.Namespace, Name: app.Name}]
		}
		setup, err := argoSetup(s, app, mine)
		if err != nil {
			return nil, fmt.Errorf("%s: ignore rules: %w", app.Source, err)
		}
		out = append(out, setup)
	}
	for _, k := range s.Kustomizations {
		paths := []string{}
		if k.Path != "" {
			paths = append(paths, k.Path)
		}
		mine := under(desired, paths, len(s.Kustomizations))
		if byUnit != nil {
			mine = byUnit[manifest.Unit{Kind: "Kustomization", Namespace: k.Namespace, Name: k.Name}]
		}
		out = append(out, fluxSetup(s, k, mine))
	}
	for _, hr := range s.HelmReleases {
		out = append(out, helmSetup(s, hr, byUnit[manifest.Unit{Kind: "HelmRelease", Namespace: hr.Namespace, Name: hr.Name}]))
	}
	if len(out) > 0 {
		return out, nil
	}
	argo, err := argoSetup(s, nil, desired)
	if err != nil {
		return nil, fmt.Errorf("the ignore rules for Argo CD's defaults: %w", err)
	}
	return append(out, argo, fluxSetup(s, nil, desired)), nil
}

// argoSetup simulates an Application, or with app nil one with Argo CD's
// defaults (automated sync, self-heal, prune) in the repository's Argo CD.
func argoSetup(s *gitops.Settings, app *gitops.ArgoApplication, desired []Desired) (*Setup, error) {
	cfg := s.ArgoConfig
	if cfg == nil {
		cfg = gitops.DefaultArgoConfig()
	}
	cmp := s.ComparisonFor(gitops.Unit{Tool: ignore.ArgoCD, App: app})
	set, err := ignore.Compile(cmp.Rules, ignore.Options{})
	if err != nil {
		return nil, err
	}
	setup := &Setup{Tool: "argocd", Desired: desired}
	if app != nil {
		setup.Unit, setup.Source = app.Name, app.Source
	}
	setup.build = func(d []Desired, kinds []schema.GroupVersionKind) (Tool, error) {
		a := &ArgoCD{
			App:                    "app",
			Automated:              true,
			SelfHeal:               true,
			Prune:                  true,
			ServerSideDiff:         cmp.Strategy == gitops.StrategyArgoServerSide,
			IncludeMutationWebhook: cmp.IncludeMutationWebhook,
			TrackingMethod:         string(cfg.TrackingMethod),
			InstanceLabelKey:       cfg.InstanceLabelKey,
			Rules:                  set,
			IgnoreAggregatedRoles:  cfg.IgnoreAggregatedRoles,
			Backoff:                DefaultBackoff(),
			Desired:                d,
			Kinds:                  kinds,
		}
		if app != nil {
			a.App = app.Name
			a.ServerSideApply = app.SyncOptions.ServerSideApply
			a.RespectIgnoreDifferences = app.SyncOptions.RespectIgnoreDifferences
			a.Automated, a.SelfHeal, a.Prune = false, false, false
			if app.Automated != nil && app.Automated.Enabled {
				a.Automated, a.SelfHeal, a.Prune = true, app.Automated.SelfHeal, app.Automated.Prune
			}
		}
		return a, nil
	}
	return setup, nil
}

// fluxSetup simulates a Kustomization, or with k nil one with Flux's
// defaults.
func fluxSetup(s *gitops.Settings, k *gitops.FluxKustomization, desired []Desired) *Setup {
	rules := drift.FluxRules(s.ComparisonFor(gitops.Unit{Tool: ignore.Flux, Kustomization: k}).Rules)
	setup := &Setup{Tool: "flux", Desired: desired}
	if k == nil {
		setup.build = func(d []Desired, _ []schema.GroupVersionKind) (Tool, error) {
			return &Flux{Rules: rules, Desired: d}, nil
		}
		return setup
	}
	setup.Unit, setup.Source = k.Name, k.Source
	setup.build = func(d []Desired, _ []schema.GroupVersionKind) (Tool, error) {
		return &Flux{Kustomization: k.Name, Namespace: k.Namespace, Interval: k.Interval,
			Rules: rules, Force: k.Force, Desired: d}, nil
	}
	return setup
}

// rendered groups desired by the unit that applies each, nil when the
// repository was not read through its entry points.
func rendered(desired []Desired) map[manifest.Unit][]Desired {
	var out map[manifest.Unit][]Desired
	for _, d := range desired {
		if d.Source.Unit.IsZero() {
			continue
		}
		if out == nil {
			out = map[manifest.Unit][]Desired{}
		}
		out[d.Source.Unit] = append(out[d.Source.Unit], d)
	}
	return out
}

// helmSetup simulates a HelmRelease as helm-controller reconciles it
// (HelmRelease): installed once, then every interval what its
// spec.driftDetection.mode says, with its ignore rules.
func helmSetup(s *gitops.Settings, hr *gitops.FluxHelmRelease, desired []Desired) *Setup {
	rules := drift.FluxRules(s.ComparisonFor(gitops.Unit{Tool: ignore.Flux, HelmRelease: hr}).Rules)
	setup := &Setup{Tool: "flux", Unit: HelmReleaseUnit(hr.Name), Source: hr.Source, Desired: desired}
	ns := hr.TargetNamespace
	if ns == "" {
		ns = hr.Namespace
	}
	setup.build = func(d []Desired, _ []schema.GroupVersionKind) (Tool, error) {
		return &HelmRelease{HelmRelease: hr.Name, Namespace: hr.Namespace,
			ReleaseName: flux.ReleaseName(hr.Name, hr.ReleaseName, hr.TargetNamespace), ReleaseNamespace: ns,
			Interval: hr.Interval, Mode: hr.DriftDetection, Rules: rules,
			ClientSideInstall: hr.InstallServerSideApply != nil && !*hr.InstallServerSideApply, Desired: d}, nil
	}
	return setup
}

// HelmReleaseUnit names a HelmRelease's setup: "HelmRelease NAME", since
// a Kustomization of the same name is usual.
func HelmReleaseUnit(name string) string { return "HelmRelease " + name }

// under picks the manifests whose file lies under one of paths (a
// repository path as written in an Application or Kustomization). With a
// single unit, or when no manifest matches, every manifest belongs to it:
// the repository checked is usually the unit's own directory.
func under(desired []Desired, paths []string, units int) []Desired {
	if units <= 1 || len(paths) == 0 {
		return desired
	}
	var out []Desired
	for _, d := range desired {
		file := path.Clean("/" + strings.ReplaceAll(d.Source.File, "\\", "/"))
		for _, p := range paths {
			p = strings.Trim(path.Clean("/"+p), "/")
			if p == "" || p == "." || strings.Contains(file, "/"+p+"/") {
				out = append(out, d)
				break
			}
		}
	}
	if len(out) == 0 {
		return desired
	}
	return out
}
