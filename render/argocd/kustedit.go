package argocd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/pkg/util"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// editKustomization applies spec to the kustomization file named file
// whose contents are data, the way Argo CD's sequence of `kustomize edit`
// commands and its patches edit leave the file: each command reads the file
// into kustomize's types.Kustomization (strictly, deprecated fields fixed),
// changes fields and writes it back, so doing all changes on one parsed
// Kustomization gives the same build. components are the already resolved
// component paths.
func editKustomization(data []byte, file string, spec KustomizeSpec, components []string) ([]byte, error) {
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return nil, err
	}
	k.FixKustomization()
	if spec.NamePrefix != "" {
		k.NamePrefix = spec.NamePrefix
	}
	if spec.NameSuffix != "" {
		k.NameSuffix = spec.NameSuffix
	}
	if len(spec.Images) > 0 {
		args := make([]string, len(spec.Images))
		for i, img := range spec.Images {
			args[i] = Envsubst(img, spec.Env)
		}
		if err := setImages(&k, args); err != nil {
			return nil, fmt.Errorf("kustomize edit set image: %w", err)
		}
	}
	if len(spec.Replicas) > 0 {
		if err := setReplicas(&k, spec.Replicas); err != nil {
			return nil, fmt.Errorf("kustomize edit set replicas: %w", err)
		}
	}
	if len(spec.CommonLabels) > 0 {
		labels := make(map[string]string, len(spec.CommonLabels))
		for name, value := range spec.CommonLabels {
			labels[name] = Envsubst(value, spec.Env)
		}
		if err := addLabels(&k, labels, spec); err != nil {
			return nil, fmt.Errorf("kustomize edit add label: %w", err)
		}
	}
	if len(spec.CommonAnnotations) > 0 {
		annotations := spec.CommonAnnotations
		if spec.CommonAnnotationsEnvsubst {
			annotations = make(map[string]string, len(spec.CommonAnnotations))
			for name, value := range spec.CommonAnnotations {
				annotations[name] = Envsubst(value, spec.Env)
			}
		}
		if err := addAnnotations(&k, annotations, spec.ForceCommonAnnotations); err != nil {
			return nil, fmt.Errorf("kustomize edit add annotation: %w", err)
		}
	}
	if spec.Namespace != "" {
		k.Namespace = spec.Namespace
	}
	if len(spec.Patches) > 0 {
		for i, p := range spec.Patches {
			patch, err := toPatch(p)
			if err != nil {
				return nil, fmt.Errorf("patch %d: %w", i, err)
			}
			k.Patches = append(k.Patches, patch)
		}
	}
	for _, c := range components {
		if c != file && !slices.Contains(k.Components, c) {
			k.Components = append(k.Components, c)
		}
	}
	return yaml.Marshal(&k)
}

// setImages is `kustomize edit set image args...`: each argument replaces
// the entry of its image name, "*" keeping the existing new name, tag or
// digest; the list ends up sorted by name.
func setImages(k *types.Kustomization, args []string) error {
	const preserve = "*"
	images := make(map[string]types.Image)
	for _, arg := range args {
		img, err := parseImage(arg)
		if err != nil {
			return err
		}
		images[img.Name] = img
	}
	for _, old := range k.Images {
		img, ok := images[old.Name]
		if !ok {
			images[old.Name] = old
			continue
		}
		if img.NewName == preserve {
			img.NewName = old.NewName
		}
		if img.NewTag == preserve {
			img.NewTag = old.NewTag
		}
		if img.Digest == preserve {
			img.Digest = old.Digest
		}
		images[old.Name] = img
	}
	k.Images = k.Images[:0]
	for _, img := range images {
		if img.NewName == preserve {
			img.NewName = ""
		}
		if img.NewTag == preserve {
			img.NewTag = ""
		}
		if img.Digest == preserve {
			img.Digest = ""
		}
		k.Images = append(k.Images, img)
	}
	sort.Slice(k.Images, func(i, j int) bool { return k.Images[i].Name < k.Images[j].Name })
	return nil
}

var errImageInvalid = errors.New(`invalid format of image, use one of the following options:
- <image>=<newimage>:<newtag>
- <image>=<newimage>@<digest>
- <image>=<newimage>:<newtag>@<digest>
- <image>=<newimage>
- <image>:<newtag>
- <image>:<newtag>@<digest>
- <image>@<digest>`)

// parseImage parses an argument of `kustomize edit set image`.
func parseImage(arg string) (types.Image, error) {
	key, value, hasKey := strings.Cut(arg, "=")
	if !hasKey {
		key, value = "", arg
	}
	name, tag, digest := util.SplitImageName(value)
	if name == arg {
		return types.Image{}, errImageInvalid
	}
	img := types.Image{NewTag: tag, Digest: digest}
	if key == "" {
		img.Name = name
	} else {
		img.Name, img.NewName = key, name
	}
	return img, nil
}

// setReplicas is `kustomize edit set replicas name=count...` with Argo CD's
// arguments: new counts replace those of the same name; the list ends up
// sorted by name.
func setReplicas(k *types.Kustomization, replicas []Replica) error {
	byName := make(map[string]types.Replica)
	for _, r := range replicas {
		count, err := intCount(r.Count)
		if err != nil {
			return err
		}
		// Argo CD passes name=count; kustomize splits it on every "=".
		parts := strings.Split(fmt.Sprintf("%s=%d", r.Name, count), "=")
		if len(parts) != 2 {
			return errors.New("invalid format of replica, use the following format: <name>=<count>")
		}
		byName[r.Name] = types.Replica{Name: r.Name, Count: int64(count)}
	}
	for _, old := range k.Replicas {
		if _, ok := byName[old.Name]; !ok {
			byName[old.Name] = old
		}
	}
	k.Replicas = k.Replicas[:0]
	for _, r := range byName {
		k.Replicas = append(k.Replicas, r)
	}
	sort.Slice(k.Replicas, func(i, j int) bool { return k.Replicas[i].Name < k.Replicas[j].Name })
	return nil
}

// intCount is Argo CD's KustomizeReplica.GetIntCount.
func intCount(c intstr.IntOrString) (int, error) {
	if c.Type == intstr.String {
		n, err := strconv.Atoi(c.StrVal)
		if err != nil {
			return 0, fmt.Errorf("expected integer value for count. Received: %s", c.StrVal)
		}
		return n, nil
	}
	return c.IntValue(), nil
}

// metadataArgs is what `kustomize edit add label/annotation` makes of Argo
// CD's "name:value" arguments: the key ends at the first colon and a value
// in double quotes loses them. Keys are taken in sorted order, so that
// errors do not depend on map order.
func metadataArgs(kind string, m map[string]string) (map[string]string, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, name := range keys {
		arg := name + ":" + m[name]
		c := strings.Index(arg, ":")
		if c == 0 {
			return nil, fmt.Errorf("invalid %s: '%s' (need k:v pair where v may be quoted)", kind, arg)
		}
		v := arg[c+1:]
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		out[arg[:c]] = v
	}
	return out, nil
}

// addLabels is `kustomize edit add label [--force] [--without-selector
// [--include-templates]]`.
func addLabels(k *types.Kustomization, labels map[string]string, spec KustomizeSpec) error {
	if !spec.LabelWithoutSelector && spec.LabelIncludeTemplates {
		return errors.New("--without-selector flag must be specified for --include-templates to work")
	}
	m, err := metadataArgs("label", labels)
	if err != nil {
		return err
	}
	if !spec.LabelWithoutSelector {
		// Argo CD's `kustomize edit add label` still writes commonLabels.
		//lint:ignore SA1019 kustomize still applies commonLabels
		if k.CommonLabels == nil {
			//lint:ignore SA1019 kustomize still applies commonLabels
			k.CommonLabels = make(map[string]string)
		}
		//lint:ignore SA1019 kustomize still applies commonLabels
		return putAll(k.CommonLabels, m, "label", spec.ForceCommonLabels)
	}
	// A labels entry with the same settings is extended, else a new one
	// is appended.
	for _, name := range sortedKeys(m) {
		i := slices.IndexFunc(k.Labels, func(l types.Label) bool {
			return !l.IncludeSelectors && l.IncludeTemplates == spec.LabelIncludeTemplates
		})
		if i < 0 {
			k.Labels = append(k.Labels, types.Label{Pairs: map[string]string{}, IncludeTemplates: spec.LabelIncludeTemplates})
			i = len(k.Labels) - 1
		}
		if k.Labels[i].Pairs == nil {
			k.Labels[i].Pairs = map[string]string{}
		}
		if err := put(k.Labels[i].Pairs, name, m[name], "label", spec.ForceCommonLabels); err != nil {
			return err
		}
	}
	return nil
}

// addAnnotations is `kustomize edit add annotation [--force]`.
func addAnnotations(k *types.Kustomization, annotations map[string]string, force bool) error {
	m, err := metadataArgs("annotation", annotations)
	if err != nil {
		return err
	}
	if k.CommonAnnotations == nil {
		k.CommonAnnotations = make(map[string]string)
	}
	return putAll(k.CommonAnnotations, m, "annotation", force)
}

func putAll(dst, src map[string]string, kind string, force bool) error {
	for _, name := range sortedKeys(src) {
		if err := put(dst, name, src[name], kind, force); err != nil {
			return err
		}
	}
	return nil
}

func put(dst map[string]string, name, value, kind string, force bool) error {
	if _, ok := dst[name]; ok && !force {
		//lint:ignore ST1005 kustomize's own wording, which users search for
		return fmt.Errorf("%s %s already in kustomization file. Use --force to override.", kind, name)
	}
	dst[name] = value
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toPatch converts a patches entry of the Application to kustomize's type,
// refusing unknown fields as kustomize's build would.
func toPatch(p map[string]any) (types.Patch, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return types.Patch{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var patch types.Patch
	if err := dec.Decode(&patch); err != nil {
		return types.Patch{}, fmt.Errorf("invalid kustomize patch: %w", err)
	}
	return patch, nil
}
