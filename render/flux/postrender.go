package flux

import (
	"bytes"
	"encoding/json"
	"fmt"

	kustomize "github.com/fluxcd/pkg/kustomize"
	//lint:ignore SA1019 helm-controller's post-renderers use these builtins
	"sigs.k8s.io/kustomize/api/builtins"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

// Labels helm-controller's origin post-renderer sets on every object.
const (
	helmOwnerNameLabel      = "helm.toolkit.fluxcd.io/name"
	helmOwnerNamespaceLabel = "helm.toolkit.fluxcd.io/namespace"
)

// PostRender applies hr's post-renderers to a chart's rendered objects as
// helm-controller's BuildPostRenderers chain does: every
// spec.postRenderers kustomize entry in order (its patches and images, built
// with kustomize from an in-memory kustomization over the objects), then
// spec.commonMetadata, then the origin labels helm.toolkit.fluxcd.io/name
// and /namespace. Objects keep the Source of the input object with the
// same kind, namespace and name.
func PostRender(objs []manifest.Object, hr *HelmRelease) ([]manifest.Object, error) {
	if hr == nil {
		return nil, fmt.Errorf("post-rendering: no HelmRelease given")
	}
	if len(objs) == 0 {
		return nil, nil
	}
	var stream bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object.Object)
		if err != nil {
			return nil, postRenderError(hr, err)
		}
		stream.WriteString("---\n")
		stream.Write(y)
	}
	out := stream.Bytes()
	var err error
	for _, pr := range hr.PostRenderers {
		if pr.Kustomize == nil {
			continue
		}
		if out, err = kustomizePostRender(out, pr.Kustomize); err != nil {
			return nil, postRenderError(hr, err)
		}
	}
	if cm := hr.CommonMetadata; cm != nil {
		var ts []resmap.Transformer
		if cm.Labels != nil {
			ts = append(ts, labelTransformer(cm.Labels))
		}
		if cm.Annotations != nil {
			ts = append(ts, &builtins.AnnotationsTransformerPlugin{
				Annotations: cm.Annotations,
				FieldSpecs:  []kustypes.FieldSpec{{Path: "metadata/annotations", CreateIfNotPresent: true}},
			})
		}
		if out, err = transform(out, ts...); err != nil {
			return nil, postRenderError(hr, err)
		}
	}
	out, err = transform(out, labelTransformer(map[string]string{
		helmOwnerNameLabel:      hr.Name,
		helmOwnerNamespaceLabel: hr.Namespace,
	}))
	if err != nil {
		return nil, postRenderError(hr, err)
	}
	return withSources(objs, hr, out)
}

func postRenderError(hr *HelmRelease, err error) error {
	return fmt.Errorf("post-rendering HelmRelease %s/%s: %w", hr.Namespace, hr.Name, err)
}

// kustomizePostRender is helm-controller's Kustomize post-renderer: the
// objects as the only resource of a kustomization holding the images and
// patches, built in memory with Flux's kustomize build options.
func kustomizePostRender(in []byte, k *KustomizePostRenderer) ([]byte, error) {
	const input = "helm-output.yaml"
	fsys := filesys.MakeFsInMemory()
	cfg := kustypes.Kustomization{Resources: []string{input}}
	cfg.APIVersion = kustypes.KustomizationVersion
	cfg.Kind = kustypes.KustomizationKind
	for _, img := range k.Images {
		cfg.Images = append(cfg.Images, kustypes.Image{Name: img.Name, NewName: img.NewName, NewTag: img.NewTag, Digest: img.Digest})
	}
	for _, p := range k.Patches {
		cfg.Patches = append(cfg.Patches, kustypes.Patch{Patch: p.Patch, Target: selector(p.Target)})
	}
	kfile, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := fsys.WriteFile(input, in); err != nil {
		return nil, err
	}
	if err := fsys.WriteFile("kustomization.yaml", kfile); err != nil {
		return nil, err
	}
	m, err := kustomize.Build(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("kustomize post-renderer: %w", err)
	}
	return m.AsYaml()
}

func selector(s *Selector) *kustypes.Selector {
	if s == nil {
		return nil
	}
	out := &kustypes.Selector{LabelSelector: s.LabelSelector, AnnotationSelector: s.AnnotationSelector}
	out.Gvk.Group, out.Gvk.Version, out.Gvk.Kind = s.Group, s.Version, s.Kind
	out.Name, out.Namespace = s.Name, s.Namespace
	return out
}

func labelTransformer(labels map[string]string) resmap.Transformer {
	return &builtins.LabelTransformerPlugin{
		Labels:     labels,
		FieldSpecs: []kustypes.FieldSpec{{Path: "metadata/labels", CreateIfNotPresent: true}},
	}
}

// transform runs kustomize transformers over a stream of objects, as
// helm-controller's common-metadata and origin post-renderers do.
func transform(in []byte, ts ...resmap.Transformer) (out []byte, err error) {
	if len(ts) == 0 {
		return in, nil
	}
	defer func() {
		// kyaml has panicked on crafted input before.
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("kustomize panicked: %v", r)
		}
	}()
	rf := provider.NewDefaultDepProvider().GetResourceFactory()
	m, err := resmap.NewFactory(rf).NewResMapFromBytes(in)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if err := t.Transform(m); err != nil {
			return nil, err
		}
	}
	return m.AsYaml()
}

// withSources decodes the post-rendered stream and gives every object the
// Source of the input object it came from.
func withSources(in []manifest.Object, hr *HelmRelease, out []byte) ([]manifest.Object, error) {
	type id struct{ kind, namespace, name string }
	sources := make(map[id]manifest.Source, len(in))
	for _, o := range in {
		sources[id{o.Object.GetKind(), o.Object.GetNamespace(), o.Object.GetName()}] = o.Source
	}
	objs, err := manifest.Decode("post-rendered HelmRelease "+hr.Namespace+"/"+hr.Name, bytes.NewReader(out), manifest.Options{})
	if err != nil {
		return nil, postRenderError(hr, err)
	}
	for i := range objs {
		o := objs[i].Object
		if src, ok := sources[id{o.GetKind(), o.GetNamespace(), o.GetName()}]; ok {
			objs[i].Source = src
		} else if len(objs) == len(in) {
			objs[i].Source = in[i].Source
		} else {
			objs[i].Source = manifest.Source{File: in[0].Source.RenderRoot, Renderer: in[0].Source.Renderer, RenderRoot: in[0].Source.RenderRoot}
		}
	}
	return objs, nil
}
