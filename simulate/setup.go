package simulate

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
)

// Setup is one simulation to run: a GitOps tool with its settings, and the
// manifests it reconciles. Build makes a fresh tool, since a tool keeps
// state (its backoff, its comparisons) during a run.
type Setup struct {
	// Tool is "argocd" or "flux"; Unit names the Application or
	// Kustomization ("" for the tool's defaults when the repository has no
	// settings for it).
	Tool, Unit string
	// Source is where the unit is defined (file:line), "" for defaults.
	Source  string
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
// with automated sync, self-heal and prune, and Flux every 10 minutes.
func Setups(s *gitops.Settings, desired []Desired) ([]*Setup, error) {
	var out []*Setup
	if s == nil {
		s = &gitops.Settings{}
	}
	cfg := s.ArgoConfig
	if cfg == nil {
		cfg = gitops.DefaultArgoConfig()
	}
	for _, app := range s.Applications {
		set, err := ignore.Compile(s.ArgoRules(app), ignore.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: ignore rules: %w", app.Source, err)
		}
		out = append(out, &Setup{Tool: "argocd", Unit: app.Name, Source: app.Source,
			Desired: under(desired, app.Paths, len(s.Applications)),
			build: func(d []Desired, kinds []schema.GroupVersionKind) (Tool, error) {
				a := &ArgoCD{
					App:                      app.Name,
					ServerSideApply:          app.SyncOptions.ServerSideApply,
					RespectIgnoreDifferences: app.SyncOptions.RespectIgnoreDifferences,
					ServerSideDiff:           app.ServerSideDiff(cfg),
					IncludeMutationWebhook:   app.CompareOptions.IncludeMutationWebhook,
					TrackingMethod:           string(cfg.TrackingMethod),
					InstanceLabelKey:         cfg.InstanceLabelKey,
					Rules:                    set,
					IgnoreAggregatedRoles:    cfg.IgnoreAggregatedRoles,
					Backoff:                  DefaultBackoff(),
					Desired:                  d,
					Kinds:                    kinds,
				}
				if app.Automated != nil && app.Automated.Enabled {
					a.Automated, a.SelfHeal, a.Prune = true, app.Automated.SelfHeal, app.Automated.Prune
				}
				return a, nil
			}})
	}
	for _, k := range s.Kustomizations {
		var rules []drift.FluxRule
		for _, r := range k.Rules() {
			for _, fr := range ignore.FluxRules([]ignore.Rule{r}) {
				rules = append(rules, drift.FluxRule{IgnoreRule: fr, Name: r.String()})
			}
		}
		paths := []string{}
		if k.Path != "" {
			paths = append(paths, k.Path)
		}
		out = append(out, &Setup{Tool: "flux", Unit: k.Name, Source: k.Source,
			Desired: under(desired, paths, len(s.Kustomizations)),
			build: func(d []Desired, _ []schema.GroupVersionKind) (Tool, error) {
				return &Flux{Kustomization: k.Name, Namespace: k.Namespace, Interval: k.Interval,
					Rules: rules, Force: k.Force, Desired: d}, nil
			}})
	}
	if len(out) > 0 {
		return out, nil
	}
	out = append(out,
		&Setup{Tool: "argocd", Desired: desired, build: func(d []Desired, kinds []schema.GroupVersionKind) (Tool, error) {
			return &ArgoCD{App: "app", Automated: true, SelfHeal: true, Prune: true, TrackingMethod: string(cfg.TrackingMethod),
				Backoff: DefaultBackoff(), Desired: d, Kinds: kinds}, nil
		}},
		&Setup{Tool: "flux", Desired: desired, build: func(d []Desired, _ []schema.GroupVersionKind) (Tool, error) {
			return &Flux{Desired: d}, nil
		}})
	return out, nil
}

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
		file := d.Source
		if i := strings.LastIndex(file, ":"); i > 0 {
			file = file[:i]
		}
		file = path.Clean("/" + strings.ReplaceAll(file, "\\", "/"))
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
