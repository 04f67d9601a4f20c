package flux

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// HelmRelease is what helm-controller v1.6 reads from a
// helm.toolkit.fluxcd.io/v2 HelmRelease to install or upgrade it, with
// helm-controller's defaults filled in. Its schedule and drift detection
// are read by gitops.ParseFluxHelmRelease, which the simulation uses.
type HelmRelease struct {
	Name      string
	Namespace string
	// ReleaseName is the Helm release name: spec.releaseName, else
	// [targetNamespace-]name, shortened past 53 characters (ReleaseName).
	ReleaseName string
	// TargetNamespace is spec.targetNamespace as written;
	// ReleaseNamespace is where the release is installed (it, else
	// Namespace); StorageNamespace is where Helm keeps the release
	// (spec.storageNamespace, else Namespace).
	TargetNamespace  string
	ReleaseNamespace string
	StorageNamespace string
	// Chart is spec.chart.spec, nil when the chart comes from ChartRef.
	Chart *ChartTemplate
	// ChartRef is spec.chartRef (OCIRepository, HelmChart or
	// ExternalArtifact), its namespace defaulted; nil when Chart is set.
	ChartRef *ObjectReference
	// Values is spec.values as helm-controller reads it (through JSON,
	// so numbers are float64), nil when unset.
	Values     map[string]any
	ValuesFrom []ValuesReference
	// InstallCRDs and UpgradeCRDs are the CRD policies of spec.install
	// and spec.upgrade; both default to Create, as helm-controller's
	// code does (skipCRDs is not read by v1.6).
	InstallCRDs CRDsPolicy
	UpgradeCRDs CRDsPolicy
	// PostRenderers run in order after the chart is rendered (PostRender).
	PostRenderers []PostRenderer
	// PostRenderStrategy says whether hooks go through the post-renderers:
	// nohooks, combined (the default) or separate.
	PostRenderStrategy string
	CommonMetadata     *CommonMetadata
	DependsOn          []DependencyReference
}

// ChartTemplate is spec.chart.spec: the chart helm-controller asks
// source-controller for through a HelmChart it creates.
type ChartTemplate struct {
	Chart string
	// Version is a semver range; "*" when unset.
	Version string
	// SourceRef is a HelmRepository, GitRepository or Bucket; its
	// namespace defaults to the HelmRelease's.
	SourceRef                ObjectReference
	ValuesFiles              []string
	IgnoreMissingValuesFiles bool
	// HelmChartName and HelmChartNamespace name the HelmChart
	// helm-controller creates: <namespace>-<name> in the source's
	// namespace.
	HelmChartName      string
	HelmChartNamespace string
}

// ObjectReference names a Flux source.
type ObjectReference struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
}

// ValuesReference is one spec.valuesFrom entry.
type ValuesReference struct {
	Kind string // ConfigMap or Secret
	Name string
	// ValuesKey is the data key; "values.yaml" when unset.
	ValuesKey string
	// TargetPath, when set, places the key's value at this --set path.
	TargetPath string
	Optional   bool
	// Literal sets the value at TargetPath verbatim (--set-literal).
	Literal bool
}

// CRDsPolicy is how helm-controller treats a chart's CRDs.
type CRDsPolicy string

// CRD policies.
const (
	CRDsSkip          CRDsPolicy = "Skip"
	CRDsCreate        CRDsPolicy = "Create"
	CRDsCreateReplace CRDsPolicy = "CreateReplace"
)

// PostRenderer is one spec.postRenderers entry.
type PostRenderer struct {
	Kustomize *KustomizePostRenderer
}

// KustomizePostRenderer holds kustomize patches and image overrides.
type KustomizePostRenderer struct {
	Patches []Patch
	Images  []Image
}

// Patch is a kustomize patch (strategic merge or JSON 6902) with an
// optional target.
type Patch struct {
	Patch  string    `json:"patch"`
	Target *Selector `json:"target,omitempty"`
}

// Selector selects objects as kustomize's patch targets do.
type Selector struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
}

// Image is a kustomize image override.
type Image struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// CommonMetadata are labels and annotations added to every object.
type CommonMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DependencyReference is one spec.dependsOn entry; Namespace defaults to
// the HelmRelease's.
type DependencyReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	ReadyExpr string `json:"readyExpr,omitempty"`
}

// hrSpec mirrors the fields of helm-controller's HelmReleaseSpec that
// truce reads, for decoding with the API's JSON names and types.
type hrSpec struct {
	Chart *struct {
		Spec struct {
			Chart                    string        `json:"chart"`
			Version                  string        `json:"version"`
			SourceRef                jsonObjectRef `json:"sourceRef"`
			ValuesFiles              []string      `json:"valuesFiles"`
			IgnoreMissingValuesFiles bool          `json:"ignoreMissingValuesFiles"`
		} `json:"spec"`
	} `json:"chart"`
	ChartRef         *jsonObjectRef        `json:"chartRef"`
	ReleaseName      string                `json:"releaseName"`
	TargetNamespace  string                `json:"targetNamespace"`
	StorageNamespace string                `json:"storageNamespace"`
	DependsOn        []DependencyReference `json:"dependsOn"`
	Install          *struct {
		CRDs CRDsPolicy `json:"crds"`
	} `json:"install"`
	Upgrade *struct {
		CRDs CRDsPolicy `json:"crds"`
	} `json:"upgrade"`
	ValuesFrom []struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		ValuesKey  string `json:"valuesKey"`
		TargetPath string `json:"targetPath"`
		Optional   bool   `json:"optional"`
		Literal    bool   `json:"literal"`
	} `json:"valuesFrom"`
	Values        json.RawMessage `json:"values"`
	PostRenderers []struct {
		Kustomize *struct {
			Patches []Patch `json:"patches"`
			Images  []Image `json:"images"`
		} `json:"kustomize"`
	} `json:"postRenderers"`
	PostRenderStrategy string          `json:"postRenderStrategy"`
	CommonMetadata     *CommonMetadata `json:"commonMetadata"`
}

type jsonObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
}

func (r jsonObjectRef) ref(defaultNamespace string) ObjectReference {
	ns := r.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	return ObjectReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, Namespace: ns}
}

// ParseHelmRelease reads a HelmRelease object. It refuses what the
// HelmRelease CRD's validation or helm-controller would refuse: a missing
// name, both or neither of spec.chart and spec.chartRef, unknown source
// kinds, CRD policies, drift detection modes or valuesFrom kinds, and
// fields of the wrong type.
func ParseHelmRelease(obj *unstructured.Unstructured) (*HelmRelease, error) {
	if obj == nil {
		return nil, errors.New("reading a HelmRelease: no object given")
	}
	hr, err := parseHelmRelease(obj)
	if err != nil {
		return nil, fmt.Errorf("reading HelmRelease %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return hr, nil
}

func parseHelmRelease(obj *unstructured.Unstructured) (*HelmRelease, error) {
	if obj.GetKind() != "HelmRelease" || !strings.HasPrefix(obj.GetAPIVersion(), "helm.toolkit.fluxcd.io/") {
		return nil, fmt.Errorf("is a %s %s, not a helm.toolkit.fluxcd.io HelmRelease", obj.GetAPIVersion(), obj.GetKind())
	}
	name, ns := obj.GetName(), obj.GetNamespace()
	if name == "" {
		return nil, errors.New("metadata.name is empty")
	}
	raw, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	var spec hrSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	hr := &HelmRelease{
		Name:               name,
		Namespace:          ns,
		TargetNamespace:    spec.TargetNamespace,
		ReleaseNamespace:   ns,
		StorageNamespace:   ns,
		PostRenderStrategy: "combined",
		CommonMetadata:     spec.CommonMetadata,
	}
	hr.ReleaseName = ReleaseName(name, spec.ReleaseName, spec.TargetNamespace)
	if spec.TargetNamespace != "" {
		hr.ReleaseNamespace = spec.TargetNamespace
	}
	if spec.StorageNamespace != "" {
		hr.StorageNamespace = spec.StorageNamespace
	}
	if spec.PostRenderStrategy != "" {
		hr.PostRenderStrategy = spec.PostRenderStrategy
	}
	if err := hr.setChart(&spec); err != nil {
		return nil, err
	}
	if hr.Values, err = helmValues(spec.Values); err != nil {
		return nil, err
	}
	if err := hr.setPolicies(&spec); err != nil {
		return nil, err
	}
	for i, v := range spec.ValuesFrom {
		if v.Kind != "ConfigMap" && v.Kind != "Secret" {
			return nil, fmt.Errorf("spec.valuesFrom[%d].kind %q is not ConfigMap or Secret", i, v.Kind)
		}
		if v.Name == "" {
			return nil, fmt.Errorf("spec.valuesFrom[%d].name is empty", i)
		}
		key := v.ValuesKey
		if key == "" {
			key = "values.yaml"
		}
		hr.ValuesFrom = append(hr.ValuesFrom, ValuesReference{Kind: v.Kind, Name: v.Name, ValuesKey: key,
			TargetPath: v.TargetPath, Optional: v.Optional, Literal: v.Literal})
	}
	for _, p := range spec.PostRenderers {
		var pr PostRenderer
		if p.Kustomize != nil {
			pr.Kustomize = &KustomizePostRenderer{Patches: p.Kustomize.Patches, Images: p.Kustomize.Images}
		}
		hr.PostRenderers = append(hr.PostRenderers, pr)
	}
	for _, d := range spec.DependsOn {
		if d.Namespace == "" {
			d.Namespace = ns
		}
		hr.DependsOn = append(hr.DependsOn, d)
	}
	return hr, nil
}

func (hr *HelmRelease) setChart(spec *hrSpec) error {
	switch {
	case spec.Chart != nil && spec.ChartRef != nil, spec.Chart == nil && spec.ChartRef == nil:
		return errors.New("either spec.chart or spec.chartRef must be set")
	case spec.ChartRef != nil:
		switch spec.ChartRef.Kind {
		case "OCIRepository", "HelmChart", "ExternalArtifact":
		default:
			return fmt.Errorf("spec.chartRef.kind %q is not OCIRepository, HelmChart or ExternalArtifact", spec.ChartRef.Kind)
		}
		if spec.ChartRef.Name == "" {
			return errors.New("spec.chartRef.name is empty")
		}
		ref := spec.ChartRef.ref(hr.Namespace)
		hr.ChartRef = &ref
		return nil
	}
	s := spec.Chart.Spec
	switch s.SourceRef.Kind {
	case "HelmRepository", "GitRepository", "Bucket":
	default:
		return fmt.Errorf("spec.chart.spec.sourceRef.kind %q is not HelmRepository, GitRepository or Bucket", s.SourceRef.Kind)
	}
	if s.Chart == "" || s.SourceRef.Name == "" {
		return errors.New("spec.chart.spec needs chart and sourceRef.name")
	}
	version := s.Version
	if version == "" {
		version = "*"
	}
	src := s.SourceRef.ref(hr.Namespace)
	hr.Chart = &ChartTemplate{
		Chart:                    s.Chart,
		Version:                  version,
		SourceRef:                src,
		ValuesFiles:              s.ValuesFiles,
		IgnoreMissingValuesFiles: s.IgnoreMissingValuesFiles,
		HelmChartName:            hr.Namespace + "-" + hr.Name,
		HelmChartNamespace:       src.Namespace,
	}
	return nil
}

func (hr *HelmRelease) setPolicies(spec *hrSpec) error {
	var err error
	if spec.Install != nil {
		hr.InstallCRDs, err = crdPolicy("spec.install.crds", spec.Install.CRDs)
	} else {
		hr.InstallCRDs, err = crdPolicy("", "")
	}
	if err != nil {
		return err
	}
	if spec.Upgrade != nil {
		hr.UpgradeCRDs, err = crdPolicy("spec.upgrade.crds", spec.Upgrade.CRDs)
	} else {
		hr.UpgradeCRDs, err = crdPolicy("", "")
	}
	if err != nil {
		return err
	}
	switch hr.PostRenderStrategy {
	case "nohooks", "combined", "separate":
	default:
		return fmt.Errorf("spec.postRenderStrategy %q is not nohooks, combined or separate", hr.PostRenderStrategy)
	}
	return nil
}

// crdPolicy is helm-controller's crdPolicyOrDefault.
func crdPolicy(field string, p CRDsPolicy) (CRDsPolicy, error) {
	switch p {
	case "":
		return CRDsCreate, nil
	case CRDsSkip, CRDsCreate, CRDsCreateReplace:
		return p, nil
	}
	return "", fmt.Errorf("%s: invalid CRD policy '%s', valid values are 'Skip', 'Create' or 'CreateReplace'", field, p)
}

// helmValues reads spec.values as helm-controller's GetValues does: the
// raw JSON unmarshalled with sigs.k8s.io/yaml.
func helmValues(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("spec.values: %w", err)
	}
	return values, nil
}
