package toolkit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed crds
var crdFS embed.FS

// Module is a source the embedded CRDs are copied from: a Go module, with
// its module path and version, or, for the Flux controllers whose modules
// the module proxy does not serve (source-watcher,
// image-automation-controller), a Git repository, with its URL as Path and
// the tag as Version.
type Module struct {
	Path, Version string
}

// String returns module@version or URL@tag.
func (m Module) String() string { return m.Path + "@" + m.Version }

// crdFile is one embedded, gzipped CRD file and the kinds it defines.
type crdFile struct {
	module int
	name   string
	kinds  []schema.GroupKind
}

// maxCRDFileSize bounds decompression of an embedded file; the largest
// (Argo CD's ApplicationSet) is about 1.6 MB.
const maxCRDFileSize = 32 << 20

// Versions returns the modules and Git repositories the embedded CRDs come
// from.
func Versions() []Module { return modules() }

// Has reports whether a CRD for gk is embedded.
func Has(gk schema.GroupKind) bool {
	for _, f := range files() {
		for _, k := range f.kinds {
			if k == gk {
				return true
			}
		}
	}
	return false
}

// CRDs decodes every embedded CustomResourceDefinition. Each call returns
// new objects, which the caller may change; decoding takes a while (some
// megabytes of YAML), so callers keep the result rather than call again.
func CRDs() ([]*unstructured.Unstructured, error) {
	mods := modules()
	var out []*unstructured.Unstructured
	for _, f := range files() {
		data, err := readGzip(f.name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded %s (%s): %w", f.name, mods[f.module], err)
		}
		objs, err := decodeDocuments(data)
		if err != nil {
			return nil, fmt.Errorf("decoding embedded %s (%s): %w", f.name, mods[f.module], err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

func readGzip(name string) ([]byte, error) {
	f, err := crdFS.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxCRDFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxCRDFileSize {
		return nil, fmt.Errorf("larger than %d bytes decompressed", maxCRDFileSize)
	}
	return data, nil
}

// decodeDocuments decodes a YAML stream into objects, skipping empty
// documents.
func decodeDocuments(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, obj)
	}
}

// CRDsFor decodes the embedded CRDs that define kinds among gks, and only
// those, so that a repository using one GitOps kind does not pay for
// decoding them all.
func CRDsFor(gks []schema.GroupKind) ([]*unstructured.Unstructured, error) {
	want := map[schema.GroupKind]bool{}
	for _, gk := range gks {
		want[gk] = true
	}
	mods := modules()
	var out []*unstructured.Unstructured
	for _, f := range files() {
		needed := false
		for _, k := range f.kinds {
			needed = needed || want[k]
		}
		if !needed {
			continue
		}
		data, err := readGzip(f.name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded %s (%s): %w", f.name, mods[f.module], err)
		}
		objs, err := decodeDocuments(data)
		if err != nil {
			return nil, fmt.Errorf("decoding embedded %s (%s): %w", f.name, mods[f.module], err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// For returns the embedded CRDs of the GitOps tools' kinds that objects use
// and that no CustomResourceDefinition among defined declares: the tool
// reading a repository is installed wherever it is used, so its kinds
// exist even when the repository does not hold their CRDs.
func For(objects, defined []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	have := DefinedKinds(defined)
	var need []schema.GroupKind
	// seen holds the kinds looked up already: a repository has thousands
	// of objects of a handful of kinds, and check calls this again for
	// every candidate fix.
	seen := map[schema.GroupKind]bool{}
	for _, o := range objects {
		gk := o.GroupVersionKind().GroupKind()
		if have[gk] || seen[gk] {
			continue
		}
		seen[gk] = true
		if Has(gk) {
			have[gk] = true
			need = append(need, gk)
		}
	}
	if len(need) == 0 {
		return nil, nil
	}
	return CRDsFor(need)
}

// DefinedKinds are the kinds the CustomResourceDefinitions among objs
// define.
func DefinedKinds(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		out[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	return out
}
