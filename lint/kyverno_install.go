package lint

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/truce-dev/truce/gitops"
)

// RuleArgoInstallsKyverno reports the Argo CD settings Kyverno's
// installation guide warns against for an Application that installs
// Kyverno's Helm chart.
const RuleArgoInstallsKyverno = "argocd-installs-kyverno-unsafely"

const (
	whyKyvernoLabelTracking = "Kyverno's Helm chart labels its resources with app.kubernetes.io/instance, the key Argo CD's label tracking " +
		"uses, and the resources Kyverno creates at run time (its webhook configurations, generated and cloned resources, reports) " +
		"copy its labels: Argo CD takes them for part of the Application, shows it OutOfSync and prunes them when prune is on."
	fixKyvernoLabelTracking = "Set application.resourceTrackingMethod: annotation in argocd-cm (the Argo CD 3.x default)."
	whyKyvernoClientSide    = "Without ServerSideApply=true Argo CD applies client-side, storing each object in the " +
		"kubectl.kubernetes.io/last-applied-configuration annotation; Kyverno's CRDs are larger than the 262144 bytes an object's " +
		"annotations may hold, so their sync fails with \"metadata.annotations: Too long\"."
	fixKyvernoClientSide = "Add ServerSideApply=true to spec.syncPolicy.syncOptions."
	whyKyvernoReplace    = "Replace=true makes Argo CD write Kyverno's objects with kubectl replace (a PUT of the whole object) or kubectl create: " +
		"every field another writer set on them is dropped on each sync, and the object is not merged as an apply merges it; Kyverno's " +
		"installation notes for Argo CD ask for ServerSideApply=true instead."
	fixKyvernoReplace          = "Remove Replace=true and use ServerSideApply=true."
	whyKyvernoAggregatedRoles  = "Kyverno's chart ships aggregated ClusterRoles whose rules the API server's aggregation controller fills in: compared with Git they are always OutOfSync."
	fixKyvernoAggregatedRoles  = "Set resource.compareoptions: \"ignoreAggregatedRoles: true\" in argocd-cm."
	kyvernoChart               = "kyverno"
	kyvernoChartRepository     = "kyverno.github.io/kyverno"
	kyvernoChartOCIRepository  = "ghcr.io/kyverno/charts"
	kyvernoChartGitRepository  = "github.com/kyverno/kyverno"
	kyvernoChartPathInKyvernos = "charts/kyverno"
)

// checkArgoInstallsKyverno: an Application whose source is Kyverno's Helm
// chart, with label tracking, without server-side apply, with Replace=true
// or without ignoreAggregatedRoles.
func checkArgoInstallsKyverno(_ context.Context, in *Input) ([]Finding, error) {
	apps, appObjs, err := argoApplications(in)
	if err != nil {
		return nil, err
	}
	cfgs, cfgObjs, err := argoConfigs(in)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for i, app := range apps {
		o := appObjs[i]
		src := kyvernoChartSource(app)
		if src == "" {
			continue
		}
		what := fmt.Sprintf("Application %q installs Kyverno's Helm chart (%s)", app.Name, src)
		for j, cfg := range cfgs {
			if cfg.TrackingMethod == gitops.TrackingLabel {
				out = append(out, finding(o, fmt.Sprintf("%s while Argo CD tracks resources by label (application.resourceTrackingMethod: label in argocd-cm at %s)",
					what, where(cfgObjs[j])), whyKyvernoLabelTracking, fixKyvernoLabelTracking))
			}
		}
		if !app.SyncOptions.ServerSideApply {
			out = append(out, finding(o, what+" without ServerSideApply=true", whyKyvernoClientSide, fixKyvernoClientSide))
		}
		if slices.Contains(app.SyncOptions.Other, "Replace=true") {
			out = append(out, finding(o, what+" with Replace=true", whyKyvernoReplace, fixKyvernoReplace))
		}
		for j, cfg := range cfgs {
			if !cfg.IgnoreAggregatedRoles {
				f := finding(o, fmt.Sprintf("%s while argocd-cm at %s does not set ignoreAggregatedRoles", what, where(cfgObjs[j])),
					whyKyvernoAggregatedRoles, fixKyvernoAggregatedRoles)
				f.Severity = SeverityInfo
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// kyvernoChartSource names the source of app that is Kyverno's Helm chart
// (its Helm repository, its OCI charts or the chart's directory in
// Kyverno's Git repository), or returns "".
func kyvernoChartSource(app *gitops.ArgoApplication) string {
	for _, s := range app.Sources {
		if what := kyvernoSource(s.RepoURL, s.Chart, s.Path); what != "" {
			return what
		}
	}
	return ""
}

// kyvernoSource says how one Application source installs Kyverno's chart,
// or "" when it does not.
func kyvernoSource(repoURL, chart, path string) string {
	repo := strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(repoURL), "/"), ".git")
	switch {
	case chart == kyvernoChart && (strings.Contains(repo, kyvernoChartRepository) || strings.Contains(repo, kyvernoChartOCIRepository)):
		return fmt.Sprintf("chart %s from %s", chart, repoURL)
	case strings.HasSuffix(repo, kyvernoChartGitRepository) && strings.Trim(path, "/") == kyvernoChartPathInKyvernos:
		return fmt.Sprintf("path %s of %s", path, repoURL)
	}
	return ""
}
