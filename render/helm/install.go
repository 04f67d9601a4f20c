package helm

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"github.com/truce-dev/truce/render/isolate"
)

// This file is helm template's rendering, taken step by step from Helm
// v4.3.1's install action with a client-only dry run
// (action.Install.RunWithContext with DryRunStrategy DryRunClient, as
// pkg/cmd/template.go sets it up) and the renderResources it calls. It
// calls the same Helm packages in the same order rather than the action:
// pkg/action imports pkg/kube, whose init registers the apiextensions
// types (CustomResourceDefinition) in client-go's shared scheme, and
// Flux's server-side apply normalisation (fluxcd/pkg/ssa) reads that
// scheme. kustomize-controller does not link Helm, so a truce binary that
// linked pkg/action would predict its drift detection of CRDs wrongly.
//
// What the action does that cannot change the output is left out: the
// in-memory release storage, the printing Kubernetes client (its Build
// returns no resources, so the ownership metadata visitor never runs),
// the release record and its status, and NOTES.txt, which helm template
// does not print.

// installClientOnly holds the action.Install fields helm template sets
// (pkg/cmd/template.go: DryRunStrategy DryRunClient, Replace true) that
// reach the client-only path. The rest keep their zero values there:
// no post-renderer, no output directory, DNS lookups off, secrets shown,
// no custom template functions, no labels.
type installClientOnly struct {
	ReleaseName          string
	Namespace            string
	KubeVersion          *common.KubeVersion // nil: Helm's default
	APIVersions          common.VersionSet   // added to Helm's defaults
	IncludeCRDs          bool
	IsUpgrade            bool
	SkipSchemaValidation bool
	// Runner runs the template engine in a worker process; nil runs it in
	// this one.
	Runner *isolate.Runner
}

// templated is what helm template prints, as action.Install leaves it in
// the release.
type templated struct {
	// Chart is the chart as rendered: after dependency processing, so
	// disabled subcharts (and their crds/) are gone (release.Chart).
	Chart *chart.Chart
	// Manifest is the release manifest: crds/ files first with
	// IncludeCRDs, then the templates in install order (release.Manifest).
	Manifest string
	// Hooks are the hooks in install order (release.Hooks).
	Hooks []*release.Hook
}

// run mirrors action.Install.RunWithContext for a client-only dry run.
// It modifies chrt (dependency processing), as the action does.
func (i *installClientOnly) run(ctx context.Context, chrt *chart.Chart, vals map[string]any) (*templated, error) {
	// availableName: on a dry run only the name's syntax is checked.
	if err := chartutil.ValidateReleaseName(i.ReleaseName); err != nil {
		return nil, fmt.Errorf("release name check failed: release name %q: %w", i.ReleaseName, err)
	}

	// Conditions, tags and import-values; disabled subcharts are removed.
	if err := chartutil.ProcessDependencies(chrt, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies processing failed: %w", err)
	}

	// Client only: Helm's default capabilities, the given Kubernetes
	// version, the default API versions plus the given ones. Helm appends
	// to the shared default slice; slices.Concat gives the same set
	// without aliasing the package-level default across renders.
	caps := common.DefaultCapabilities.Copy()
	if i.KubeVersion != nil {
		caps.KubeVersion = *i.KubeVersion
	}
	caps.APIVersions = slices.Concat(caps.APIVersions, i.APIVersions)

	// helm template --is-upgrade is honoured because this is a dry run.
	options := common.ReleaseOptions{
		Name:      i.ReleaseName,
		Namespace: i.Namespace,
		Revision:  1,
		IsInstall: !i.IsUpgrade,
		IsUpgrade: i.IsUpgrade,
	}
	// Coalesces the chart's values.yaml (and subcharts') with vals and
	// validates them against values.schema.json unless told not to.
	valuesToRender, err := util.ToRenderValuesWithSchemaValidation(chrt, vals, options, caps, i.SkipSchemaValidation)
	if err != nil {
		return nil, err
	}

	hooks, manifest, err := i.renderResources(ctx, chrt, valuesToRender, caps)
	if err != nil {
		return nil, err
	}
	return &templated{Chart: chrt, Manifest: manifest, Hooks: hooks}, nil
}

// renderResources mirrors action.Configuration.renderResources with no
// post-renderer, no output directory, no Kubernetes client and secrets
// shown.
func (i *installClientOnly) renderResources(ctx context.Context, ch *chart.Chart, values common.Values, caps *common.Capabilities) ([]*release.Hook, string, error) {
	if ch.Metadata.KubeVersion != "" {
		if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
			return nil, "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.Version)
		}
	}

	// The zero Engine (renderTemplates) has no client provider, so lookup
	// returns an empty map, as helm template's; EnableDNS stays false
	// (--enable-dns unset).
	files, err := renderTemplates(ctx, i.Runner, ch, values)
	if err != nil {
		return nil, "", err
	}

	// NOTES.txt (the chart's and its subcharts') is neither a resource
	// nor a hook; the action keeps it as the release notes, which helm
	// template does not print.
	for k := range files {
		if strings.HasSuffix(k, notesFileSuffix) {
			delete(files, k)
		}
	}

	// Split hooks from resources and order both by kind for install;
	// empty documents and partials are dropped here.
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, "", err
	}

	var b bytes.Buffer
	if i.IncludeCRDs {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return hooks, b.String(), nil
}

// notesFileSuffix is action's: any template ending in it is notes.
const notesFileSuffix = "NOTES.txt"

// checkDependencies is the check helm template makes before rendering
// (pkg/cmd/install.go runInstall): every dependency in Chart.yaml must be
// in charts/. It is action.CheckDependencies, which lives in pkg/action
// (see above for why that package is not linked).
func checkDependencies(ch *chart.Chart) error {
	ac, err := ci.NewAccessor(ch)
	if err != nil {
		return err
	}
	var missing []string
outer:
	for _, r := range ac.MetaDependencies() {
		rac, err := ci.NewDependencyAccessor(r)
		if err != nil {
			return err
		}
		for _, d := range ac.Dependencies() {
			dac, err := ci.NewAccessor(d)
			if err != nil {
				return err
			}
			if dac.Name() == rac.Name() {
				continue outer
			}
		}
		missing = append(missing, rac.Name())
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}
