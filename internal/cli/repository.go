package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/schema/toolkit"
)

// repository is what a directory or Git repository holds: ordinary
// manifests and the GitOps tools' settings.
type repository struct {
	manifests []manifest.Object
	// base are objects the cluster holds before the repository is
	// applied (namespaces Argo CD or flux bootstrap create).
	base     []manifest.Object
	settings *gitops.Settings
	findings []string
}

// loadRepository reads manifests from directories, files or Git arguments
// (URL[//sub/path][?ref=REF]) and separates the GitOps settings out.
//
// Local paths are read through their entry points (render/world), so
// that charts, Jsonnet and Flux builds are rendered; the paths must then
// hold one cluster.
func loadRepository(ctx context.Context, cmd *cobra.Command, rf *renderFlags, args []string, ref string) (*repository, error) {
	var objs []manifest.Object
	worlds, ok, err := readWorlds(ctx, rf, args)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		if objs, err = loadArgs(ctx, cmd, rf, args, ref); err != nil {
			return nil, err
		}
	case len(worlds) > 1:
		var names []string
		for _, w := range worlds {
			names = append(names, w.Name)
		}
		return nil, fmt.Errorf("%s holds %d clusters (%s): diff one of them", strings.Join(args, " "), len(worlds), strings.Join(names, ", "))
	default:
		objs = worlds[0].Objects
	}
	var base []manifest.Object
	var unitFindings []string
	if ok && len(worlds) == 1 {
		base = worlds[0].Base
		for _, u := range worlds[0].Units {
			if u.Problem != nil {
				unitFindings = append(unitFindings, fmt.Sprintf("%s: %s not rendered, its objects are not compared: %v", u.Source, u.Unit, u.Problem))
			}
		}
		unitFindings = append(unitFindings, worlds[0].Notes...)
	}
	in := make([]gitops.Object, len(objs))
	for i, o := range objs {
		in[i] = gitops.ObjectOf(o)
	}
	settings, rest, err := gitops.Discover(in)
	if err != nil {
		return nil, err
	}
	repo := &repository{settings: settings, base: base, findings: unitFindings}
	bySource := map[*unstructured.Unstructured]manifest.Object{}
	for _, o := range objs {
		bySource[o.Object] = o
	}
	for _, r := range rest {
		repo.manifests = append(repo.manifests, bySource[r.Unstructured])
	}
	for _, w := range settings.Warnings {
		repo.findings = append(repo.findings, w.String())
	}
	return repo, nil
}

func (r *repository) objects() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(r.manifests))
	for i, m := range r.manifests {
		out[i] = m.Object
	}
	return out
}

// buildStrategy picks the strategy (auto: from the repository's settings)
// and compiles the ignore rules that go with it.
func (o *diffOptions) buildStrategy(ctx context.Context, repo *repository, c cluster.Cluster, mem *memory.Cluster) (drift.Strategy, error) {
	s := repo.settings
	unit := gitops.Unit{}
	if len(s.Applications) > 0 {
		unit.App = s.Applications[0]
		if len(s.Applications) > 1 {
			repo.findings = append(repo.findings, fmt.Sprintf("%d Argo CD Applications found; using the settings of %s (%s)", len(s.Applications), unit.App.Name, unit.App.Source))
		}
	}
	switch o.strategy {
	case strategyAuto:
	case strategyFlux:
		unit.Tool = ignore.Flux
	case strategyArgoLegacy, strategyArgoSSD:
		unit.Tool = ignore.ArgoCD
	case strategyPredicted:
		return predicted(mem, s)
	default:
		return nil, fmt.Errorf("unknown --strategy %q (want %s)", o.strategy, strategyListForUsage)
	}
	cmp := s.ComparisonFor(unit)
	if cmp.Tool == "" {
		return predicted(mem, s)
	}
	set, err := ignore.Compile(cmp.Rules, ignore.Options{})
	if err != nil {
		return nil, err
	}
	repo.addFindings(set)
	if cmp.Tool == ignore.Flux {
		// Flux's own library applies the rules.
		return &drift.Flux{Cluster: c, Rules: drift.FluxRules(cmp.Rules)}, nil
	}
	tracking := drift.Tracking{}
	if unit.App != nil {
		tracking = drift.Tracking{App: unit.App.Name, Method: string(s.ArgoConfig.TrackingMethod)}
	}
	tcs := drift.TypeConvertersFor(ctx, c)
	serverSide := cmp.Strategy == gitops.StrategyArgoServerSide
	if o.strategy != strategyAuto {
		serverSide = o.strategy == strategyArgoSSD
	}
	if serverSide {
		return drift.NewArgoServerSide(c, cmp.IncludeMutationWebhook, set, tcs, tracking, s.ArgoConfig.IgnoreAggregatedRoles), nil
	}
	return drift.NewArgoLegacy(c, set, tcs, tracking, s.ArgoConfig.IgnoreAggregatedRoles), nil
}

// predicted is the offline admission chain's prediction, which needs the
// in-process cluster.
func predicted(mem *memory.Cluster, s *gitops.Settings) (drift.Strategy, error) {
	if mem == nil {
		return nil, fmt.Errorf("--strategy predicted makes no API call: use -c to describe the cluster instead of --kubeconfig")
	}
	return &drift.Predicted{Admitter: mem, Order: predictedOrder(s)}, nil
}

func (repo *repository) addFindings(set *ignore.Set) {
	for _, f := range set.Ineffective(repo.objects()) {
		repo.findings = append(repo.findings, f.String())
	}
}

// withoutUnknownKinds leaves out the manifests of a kind no CRD defines
// (in the repository, -c or the tools' own kinds), with a finding for
// each: what the API server would do with them is unknown.
func (r *repository) withoutUnknownKinds(mapper meta.RESTMapper) {
	defined := toolkit.DefinedKinds(r.objects())
	kept := r.manifests[:0]
	for _, m := range r.manifests {
		gvk := m.Object.GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil && !defined[gvk.GroupKind()] {
			r.findings = append(r.findings, fmt.Sprintf("%s: %s %s not compared: no CRD for %s: pass it with -c or diff against a cluster", m.Source, gvk.Kind, m.Object.GetName(), gvk.GroupKind()))
			continue
		}
		kept = append(kept, m)
	}
	r.manifests = kept
}
