package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
)

// repository is what a directory or Git repository holds: ordinary
// manifests and the GitOps tools' settings.
type repository struct {
	manifests []manifest.Object
	settings  *gitops.Settings
	findings  []string
}

// loadRepository reads manifests from directories, files or Git arguments
// (URL[//sub/path][?ref=REF]) and separates the GitOps settings out.
func loadRepository(ctx context.Context, cmd *cobra.Command, args []string, ref string) (*repository, error) {
	objs, err := loadArgs(ctx, cmd, args, ref)
	if err != nil {
		return nil, err
	}
	in := make([]gitops.Object, len(objs))
	for i, o := range objs {
		in[i] = gitops.Object{Source: o.Source.String(), Unstructured: o.Object}
	}
	settings, rest, err := gitops.Discover(in)
	if err != nil {
		return nil, err
	}
	repo := &repository{settings: settings}
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
	name := o.strategy
	var app *gitops.ArgoApplication
	if len(s.Applications) > 0 {
		app = s.Applications[0]
		if len(s.Applications) > 1 {
			repo.findings = append(repo.findings, fmt.Sprintf("%d Argo CD Applications found; using the settings of %s (%s)", len(s.Applications), app.Name, app.Source))
		}
	}
	if name == strategyAuto {
		switch {
		case len(s.Kustomizations) > 0:
			name = strategyFlux
		case app != nil && app.ServerSideDiff(s.ArgoConfig):
			name = strategyArgoSSD
		case app != nil:
			name = strategyArgoLegacy
		default:
			name = strategyPredicted
		}
	}
	switch name {
	case strategyFlux:
		var rules []ignore.Rule
		for _, k := range s.Kustomizations {
			rules = append(rules, k.Rules()...)
		}
		if err := reportIneffective(repo, rules); err != nil {
			return nil, err
		}
		flux := &drift.Flux{Cluster: c}
		for _, r := range rules {
			for _, fr := range ignore.FluxRules([]ignore.Rule{r}) {
				flux.Rules = append(flux.Rules, drift.FluxRule{IgnoreRule: fr, Name: r.String()})
			}
		}
		return flux, nil
	case strategyArgoLegacy, strategyArgoSSD:
		rules := s.ArgoRules(app)
		set, err := ignore.Compile(rules, ignore.Options{})
		if err != nil {
			return nil, err
		}
		repo.addFindings(set)
		tracking := drift.Tracking{}
		if app != nil {
			tracking = drift.Tracking{App: app.Name, Method: string(s.ArgoConfig.TrackingMethod)}
		}
		tcs := drift.TypeConvertersFor(ctx, c)
		if name == strategyArgoSSD {
			include := app != nil && app.CompareOptions.IncludeMutationWebhook
			return drift.NewArgoServerSide(c, include, set, tcs, tracking, s.ArgoConfig.IgnoreAggregatedRoles), nil
		}
		return drift.NewArgoLegacy(c, set, tcs, tracking, s.ArgoConfig.IgnoreAggregatedRoles), nil
	case strategyPredicted:
		if mem == nil {
			return nil, fmt.Errorf("--strategy predicted makes no API call: use -c to describe the cluster instead of --kubeconfig")
		}
		return &drift.Predicted{Admitter: mem, Order: predictedOrder(s)}, nil
	}
	return nil, fmt.Errorf("unknown --strategy %q (want %s)", o.strategy, strategyListForUsage)
}

// reportIneffective compiles rules only to report those that do nothing;
// Flux's own library applies them.
func reportIneffective(repo *repository, rules []ignore.Rule) error {
	set, err := ignore.Compile(rules, ignore.Options{})
	if err != nil {
		return err
	}
	repo.addFindings(set)
	return nil
}

func (repo *repository) addFindings(set *ignore.Set) {
	for _, f := range set.Ineffective(repo.objects()) {
		repo.findings = append(repo.findings, f.String())
	}
}
