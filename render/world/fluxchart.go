package world

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/render/flux"
	"github.com/truce-dev/truce/render/helm"
)

// fluxChart finds the chart a HelmRelease installs: spec.chart.spec, as
// the HelmChart helm-controller creates from it, or spec.chartRef, an
// OCIRepository or a HelmChart of the repository.
func (s *state) fluxChart(ctx context.Context, hr *flux.HelmRelease) (*helm.Chart, error) {
	if ref := hr.ChartRef; ref != nil {
		ns := ref.Namespace
		if ns == "" {
			ns = hr.Namespace
		}
		switch ref.Kind {
		case "OCIRepository":
			return s.ociChart(ctx, ns, ref.Name)
		case "HelmChart":
			return s.helmChart(ctx, ns, ref.Name)
		}
		return nil, unpredictable(fmt.Sprintf("chartRef %s %s/%s", ref.Kind, ns, ref.Name), "truce reads charts from OCIRepository and HelmChart chartRefs only")
	}
	c := hr.Chart
	if c == nil {
		return nil, fmt.Errorf("the HelmRelease has neither spec.chart nor spec.chartRef")
	}
	ns := c.SourceRef.Namespace
	if ns == "" {
		ns = hr.Namespace
	}
	return s.chartFrom(ctx, c.Chart, c.Version, c.SourceRef.Kind, ns, c.SourceRef.Name, chartValuesFiles{Files: c.ValuesFiles, IgnoreMissing: c.IgnoreMissingValuesFiles})
}

// helmChartSpec is a source.toolkit.fluxcd.io HelmChart, as far as
// finding its chart goes.
type helmChartSpec struct {
	Spec struct {
		Chart     string `json:"chart"`
		Version   string `json:"version"`
		SourceRef struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"sourceRef"`
		ValuesFiles              []string `json:"valuesFiles"`
		IgnoreMissingValuesFiles bool     `json:"ignoreMissingValuesFiles"`
	} `json:"spec"`
}

// helmChart is the chart of a HelmChart: its source is in its own
// namespace, and no version is any version ("*"), as source-controller
// reads it.
func (s *state) helmChart(ctx context.Context, namespace, name string) (*helm.Chart, error) {
	obj, ok := s.find(sourceGroup, "HelmChart", namespace, name)
	if !ok {
		return nil, fmt.Errorf("chartRef HelmChart %s/%s is not in the repository", namespace, name)
	}
	var hc helmChartSpec
	if err := decodeSpec(obj, &hc); err != nil {
		return nil, fmt.Errorf("reading HelmChart %s/%s: %w", namespace, name, err)
	}
	version := hc.Spec.Version
	if version == "" {
		version = "*"
	}
	return s.chartFrom(ctx, hc.Spec.Chart, version, hc.Spec.SourceRef.Kind, namespace, hc.Spec.SourceRef.Name,
		chartValuesFiles{Files: hc.Spec.ValuesFiles, IgnoreMissing: hc.Spec.IgnoreMissingValuesFiles})
}

// chartFrom finds chart at version in the source kind namespace/name, as
// source-controller builds a HelmChart: pulled from a HelmRepository, or
// loaded from a directory of a GitRepository's or Bucket's artifact; valuesFiles
// merged into its values.
func (s *state) chartFrom(ctx context.Context, chart, version, kind, namespace, name string, valuesFiles chartValuesFiles) (*helm.Chart, error) {
	switch kind {
	case "HelmRepository":
		repo, ok := s.find(sourceGroup, kind, namespace, name)
		if !ok {
			return nil, fmt.Errorf("HelmRepository %s/%s is not in the repository", namespace, name)
		}
		url, _, _ := unstructured.NestedString(repo.Object, "spec", "url")
		p := s.puller()
		if typ, _, _ := unstructured.NestedString(repo.Object, "spec", "type"); typ == "oci" {
			p.PlainHTTP, _, _ = unstructured.NestedBool(repo.Object, "spec", "insecure")
		}
		ch, err := p.Pull(ctx, helm.Ref{RepoURL: url, Chart: chart, Version: version})
		if err != nil {
			return nil, err
		}
		return valuesFiles.apply(ch, "")
	case "GitRepository", "Bucket":
		root, err := s.sourceRoot(ctx, kind, namespace, name)
		if err != nil {
			return nil, err
		}
		dir, err := inRoot(root, root, chart)
		if err != nil {
			return nil, err
		}
		ch, err := s.loadChart(ctx, dir, root)
		if err != nil {
			return nil, err
		}
		return valuesFiles.apply(ch, root)
	}
	return nil, unpredictable(fmt.Sprintf("chart %s from %s %s/%s", chart, kind, namespace, name), "truce reads charts from HelmRepository, GitRepository, Bucket and OCIRepository sources only")
}
