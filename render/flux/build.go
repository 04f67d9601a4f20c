package flux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	kustomize "github.com/fluxcd/pkg/kustomize"
	securefs "github.com/fluxcd/pkg/kustomize/filesys"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/resource"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// BuildOptions are what a Flux Kustomization is built with.
type BuildOptions struct {
	// Root is the root directory of the source artifact on disk: the
	// checkout of the GitRepository, or the directory ArtifactCopy laid
	// out. spec.path is resolved under it and the build may not leave it.
	Root string
	// Objects are the ConfigMaps and Secrets postBuild.substituteFrom can
	// read: the world's objects. Other objects are ignored.
	Objects []*unstructured.Unstructured
	// Render bounds reading and the output.
	Render render.Options
}

const (
	originAnnotation = "config.kubernetes.io/origin"
	// Labels kustomize-controller sets on every object it applies
	// (ssa.ResourceManager.SetOwnerLabels with its group).
	ownerNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	ownerNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
)

// Build returns the objects kustomize-controller v1.10 would apply for the
// Flux Kustomization k, a kustomize.toolkit.fluxcd.io/v1 Kustomization:
//
//   - spec.path is resolved under opts.Root; a path that leaves it is
//     refused.
//   - The kustomization file is generated when the directory has none, and
//     amended with spec.patches, images, namePrefix, nameSuffix,
//     targetNamespace and components, by fluxcd/pkg/kustomize's Generator,
//     in memory: the user's files are never written.
//   - It is built with Flux's secure build: confined to the root, builtin
//     plugins only. Remote bases and URLs are refused (truce is offline).
//   - spec.postBuild substitution runs per object with fluxcd/pkg/kustomize,
//     reading substituteFrom from opts.Objects in k's namespace; objects
//     labelled or annotated kustomize.toolkit.fluxcd.io/substitute:
//     disabled are left alone.
//   - Like kustomize-controller before it applies, Build sets the owner
//     labels kustomize.toolkit.fluxcd.io/name and /namespace and then
//     spec.commonMetadata on every object.
//
// SOPS decryption is not done. Objects point at the resource file and line
// they were written on where kustomize's origin tracking allows, else at
// the directory, with Source.Kustomization naming the kustomization file
// (generated or real). Values from Secrets never appear in errors.
func Build(ctx context.Context, k *unstructured.Unstructured, opts BuildOptions) ([]manifest.Object, error) {
	if k == nil {
		return nil, errors.New("building a Flux Kustomization: no object given")
	}
	what := fmt.Sprintf("Flux Kustomization %s/%s", k.GetNamespace(), k.GetName())
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("building %s: %w", what, err)
	}
	b, err := newBuilder(k, opts)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", what, err)
	}
	objs, err := b.run(ctx)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", what, mask(err, b.secrets))
	}
	return objs, nil
}

// builder carries one Build.
type builder struct {
	k        *unstructured.Unstructured
	opts     BuildOptions
	lim      limits
	root     string // opts.Root with symlinks resolved, absolute
	dir      string // spec.path under root, resolved
	kfile    string // the kustomization file, generated or real
	secrets  map[string]string
	injected bool // truce asked kustomize for origin annotations
}

func newBuilder(k *unstructured.Unstructured, opts BuildOptions) (*builder, error) {
	b := &builder{k: k.DeepCopy(), opts: opts, lim: limitsOf(opts.Render.Manifest), secrets: map[string]string{}}
	if opts.Root == "" {
		return nil, errors.New("no source root given")
	}
	abs, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	if b.root, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("source root: %w", err)
	}
	specPath, _, err := unstructured.NestedString(k.Object, "spec", "path")
	if err != nil {
		return nil, fmt.Errorf("spec.path: %w", err)
	}
	b.dir, err = b.resolve(specPath)
	return b, err
}

// resolve finds spec.path under the root. kustomize-controller joins it
// with securejoin, which silently clamps "../.." to the root; truce refuses
// such a path because it cannot mean what its author wanted.
func (b *builder) resolve(specPath string) (string, error) {
	rel := filepath.Clean(strings.TrimLeft(filepath.FromSlash(specPath), string(filepath.Separator)))
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("spec.path %q leaves the source root: %w", specPath, manifest.ErrOutsideRoot)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(b.root, rel))
	if err != nil {
		return "", fmt.Errorf("kustomization path not found: %s: %w", b.display(filepath.Join(b.root, rel)), errors.Unwrap(err))
	}
	if !b.inside(dir) {
		return "", fmt.Errorf("spec.path %q leads outside the source root through a symlink: %w", specPath, manifest.ErrOutsideRoot)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return "", fmt.Errorf("kustomization path %s is not a directory", b.display(dir))
	}
	return dir, nil
}

func (b *builder) inside(p string) bool {
	rel, err := filepath.Rel(b.root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// display maps a path under the root to the caller's spelling of it.
func (b *builder) display(p string) string {
	rel, err := filepath.Rel(b.root, p)
	if err != nil || !b.inside(p) {
		return p
	}
	return filepath.Join(b.opts.Root, rel)
}

func (b *builder) run(ctx context.Context) ([]manifest.Object, error) {
	data, err := b.generate()
	if err != nil {
		return nil, err
	}
	resources, err := b.build(data)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	loc := newLocator(b)
	sources := make([]manifest.Source, len(resources))
	for i, res := range resources {
		// kustomize-controller's own check, naming the object instead of
		// printing it.
		if res.GetName() == "" || res.GetKind() == "" || res.GetApiVersion() == "" {
			return nil, fmt.Errorf("failed to decode Kubernetes apiVersion, kind and name of %s %q", res.GetKind(), res.GetName())
		}
		sources[i] = loc.source(res)
		if b.injected {
			if err := stripOrigin(res); err != nil {
				return nil, err
			}
		}
	}
	if err := b.substitute(ctx, resources); err != nil {
		return nil, err
	}
	objs, err := b.decode(resources, sources)
	if err != nil {
		return nil, err
	}
	b.finish(objs)
	return objs, nil
}

// generate returns the kustomization file Flux's generator writes into the
// directory, with origin annotations switched on for positions.
func (b *builder) generate() ([]byte, error) {
	if !hasKustomization(b.dir) {
		if err := prescan(b.dir, b.lim, maxAliasNodes(b.opts.Render.Manifest), b.display); err != nil {
			return nil, err
		}
	}
	gen := kustomize.NewGenerator(b.root, *b.k)
	data, kfile, _, err := gen.GenerateManifest(b.dir)
	if err != nil {
		return nil, fmt.Errorf("generating the kustomization for %s: %w", b.display(b.dir), err)
	}
	b.kfile = kfile
	if err := checkKustomization(b.display(kfile), b.dir, data); err != nil {
		return nil, err
	}
	return b.withOrigin(data)
}

func hasKustomization(dir string) bool {
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && !info.IsDir() {
			return true
		}
	}
	return false
}

// withOrigin adds originAnnotations to the kustomization's buildMetadata
// unless it asks for them already; Build removes them again.
func (b *builder) withOrigin(data []byte) ([]byte, error) {
	var kus kustypes.Kustomization
	if err := yaml.Unmarshal(data, &kus); err != nil {
		return nil, fmt.Errorf("reading the generated kustomization: %w", err)
	}
	for _, m := range kus.BuildMetadata {
		if m == kustypes.OriginAnnotations {
			return data, nil
		}
	}
	kus.BuildMetadata = append(kus.BuildMetadata, kustypes.OriginAnnotations)
	out, err := yaml.Marshal(kus)
	if err != nil {
		return nil, err
	}
	b.injected = true
	return out, nil
}

// build runs Flux's build on the directory, reading the kustomization
// file from memory and everything else from the root through guardFS.
func (b *builder) build(kustomization []byte) ([]*resource.Resource, error) {
	disk, err := securefs.MakeFsOnDiskSecure(b.root)
	if err != nil {
		return nil, err
	}
	guard := &guardFS{FileSystem: disk, lim: b.lim, aliases: maxAliasNodes(b.opts.Render.Manifest),
		left: b.lim.maxTotal, display: b.display}
	fsys := securefs.MakeFsInMemory(guard)
	if err := fsys.WriteFile(b.kfile, kustomization); err != nil {
		return nil, err
	}
	m, err := kustomize.Build(fsys, b.dir)
	if guard.refusal != nil {
		return nil, guard.refusal
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), b.root, b.opts.Root)
		return nil, fmt.Errorf("kustomize build failed: %s: %w", msg, manifest.ErrKustomize)
	}
	return m.Resources(), nil
}

func stripOrigin(res *resource.Resource) error {
	a := res.GetAnnotations()
	if _, ok := a[originAnnotation]; !ok {
		return nil
	}
	delete(a, originAnnotation)
	return res.SetAnnotations(a)
}

// substitute runs postBuild substitution on every object, as
// kustomize-controller does when spec.postBuild is set.
func (b *builder) substitute(ctx context.Context, resources []*resource.Resource) error {
	postBuild, ok, _ := unstructured.NestedFieldNoCopy(b.k.Object, "spec", "postBuild")
	if !ok || postBuild == nil {
		return nil
	}
	c, err := b.client()
	if err != nil {
		return err
	}
	strategy, _, _ := unstructured.NestedString(b.k.Object, "spec", "postBuild", "substituteStrategy")
	ctx = kustomize.ContextWithSecretVarsCollector(ctx, func(vars map[string]string) {
		for k, v := range vars {
			b.secrets[k] = v
		}
	})
	for _, res := range resources {
		if err := ctx.Err(); err != nil {
			return err
		}
		// kustomize-controller runs without --strict-substitution by
		// default.
		if _, err := kustomize.SubstituteVariables(ctx, c, *b.k, res,
			kustomize.SubstituteWithStrict(false),
			kustomize.SubstituteWithAlways(strategy == "Always")); err != nil {
			return fmt.Errorf("post build failed for '%s/%s': %w", res.GetGvk(), res.GetName(), err)
		}
	}
	return nil
}

// client serves the ConfigMaps and Secrets substituteFrom names.
func (b *builder) client() (client.Client, error) {
	refs, _, err := unstructured.NestedSlice(b.k.Object, "spec", "postBuild", "substituteFrom")
	if err != nil {
		return nil, fmt.Errorf("spec.postBuild.substituteFrom: %w", err)
	}
	keys := make(map[objectKey]bool)
	for _, r := range refs {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		keys[objectKey{kind, b.k.GetNamespace(), name}] = true
	}
	found, err := lookup(b.opts.Objects, keys)
	if err != nil {
		return nil, err
	}
	return worldClient(found)
}

// decode serialises the objects into one stream, bounded like any file,
// and decodes it with manifest.Decode so that what is returned is exactly
// what kubectl-compatible decoding makes of what Flux would apply.
func (b *builder) decode(resources []*resource.Resource, sources []manifest.Source) ([]manifest.Object, error) {
	var stream bytes.Buffer
	starts := make([]int, 0, len(resources))
	line := 1
	for _, res := range resources {
		y, err := res.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("serialising %s %q: %w", res.GetKind(), res.GetName(), err)
		}
		stream.WriteString("---\n")
		line++
		starts = append(starts, line)
		stream.Write(y)
		line += bytes.Count(y, []byte("\n"))
		if int64(stream.Len()) > b.lim.maxFile {
			return nil, fmt.Errorf("the build output of %s is larger than the %s limit (MaxFileBytes): %w",
				b.display(b.kfile), formatBytes(b.lim.maxFile), manifest.ErrTooLarge)
		}
	}
	name := b.display(b.kfile)
	fallback := manifest.Source{File: b.display(b.dir), Kustomization: name}
	at := func(l int) manifest.Source {
		i := sort.SearchInts(starts, l+1) - 1
		if i < 0 {
			return fallback
		}
		return sources[i]
	}
	objs, err := manifest.Decode(name, &stream, b.opts.Render.Manifest)
	for i := range objs {
		objs[i].Source = at(objs[i].Source.Line)
	}
	if err != nil {
		return nil, relocate(err, name, at)
	}
	return objs, nil
}

// relocate points decoding errors of the build output at the objects'
// sources.
func relocate(err error, name string, at func(int) manifest.Source) error {
	manifest.EachError(err, func(me *manifest.Error) {
		if me.Source.File == name {
			me.Source = at(me.Source.Line)
			me.Msg = "in the build output: " + me.Msg
		}
	})
	return err
}

// finish does what kustomize-controller does to the objects between
// building and applying them: the owner labels, then spec.commonMetadata.
func (b *builder) finish(objs []manifest.Object) {
	us := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		us[i] = o.Object
	}
	ssautil.SetCommonMetadata(us, map[string]string{
		ownerNameLabel:      b.k.GetName(),
		ownerNamespaceLabel: b.k.GetNamespace(),
	}, nil)
	labels, _, _ := unstructured.NestedStringMap(b.k.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(b.k.Object, "spec", "commonMetadata", "annotations")
	if labels != nil || annotations != nil {
		ssautil.SetCommonMetadata(us, labels, annotations)
	}
	for i := range objs {
		if raw, err := json.Marshal(objs[i].Object.Object); err == nil {
			objs[i].Raw = raw
		}
	}
}
