package schema

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"
)

// documents serves OpenAPI v3 documents per group-version, as the server's
// /openapi/v3/{apis/G/V} endpoints do: built-ins from the embedded copy of
// the 1.37.2 documents, custom resources built by the apiextensions builder.
type documents struct {
	mu         sync.Mutex
	generation int
	crdDocs    map[k8sschema.GroupVersion][]byte // built lazily from CRDs
	converter  map[k8sschema.GroupVersion]managedfields.TypeConverter
	// shared, when set, holds converters other registries built from
	// the same documents.
	shared ConverterCache
}

// ConverterCache shares type converters between registries, by the
// SHA-256 of the OpenAPI document they are built from; admission.Cache is
// one.
type ConverterCache interface {
	TypeConverter(digest [sha256.Size]byte, build func() (managedfields.TypeConverter, error)) (managedfields.TypeConverter, error)
}

// ShareConverters makes the registry take type converters from c and add
// those it builds: building one decodes a whole OpenAPI document, and
// every registry of a process serves the same built-in documents.
func (r *Registry) ShareConverters(c ConverterCache) {
	r.docs.mu.Lock()
	defer r.docs.mu.Unlock()
	r.docs.shared = c
}

func newDocuments() *documents {
	return &documents{
		crdDocs:   map[k8sschema.GroupVersion][]byte{},
		converter: map[k8sschema.GroupVersion]managedfields.TypeConverter{},
	}
}

func (d *documents) invalidate(group string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.generation++
	for gv := range d.crdDocs {
		if gv.Group == group {
			delete(d.crdDocs, gv)
		}
	}
	for gv := range d.converter {
		if gv.Group == group {
			delete(d.converter, gv)
		}
	}
}

func builtinDocPath(gv k8sschema.GroupVersion) string {
	if gv.Group == "" {
		return "openapi/api__" + gv.Version + "_openapi.json.gz"
	}
	return "openapi/apis__" + gv.Group + "__" + gv.Version + "_openapi.json.gz"
}

// builtinDocs holds the embedded documents decompressed, each once per
// process (a *builtinDoc per GroupVersion): every registry of a process
// serves the same bytes, and decompressing a document took as long as
// a third of decoding it. Entries never change once built.
var builtinDocs sync.Map

type builtinDoc struct {
	once   sync.Once
	data   []byte
	digest [sha256.Size]byte
	err    error
}

// builtinDocument returns the embedded document of gv and its SHA-256;
// callers must not change the bytes.
func builtinDocument(gv k8sschema.GroupVersion) ([]byte, [sha256.Size]byte, error) {
	v, _ := builtinDocs.LoadOrStore(gv, &builtinDoc{})
	d := v.(*builtinDoc)
	d.once.Do(func() {
		d.data, d.err = readBuiltinDoc(gv)
		if d.err == nil {
			d.digest = sha256.Sum256(d.data)
		}
	})
	return d.data, d.digest, d.err
}

func readBuiltinDoc(gv k8sschema.GroupVersion) ([]byte, error) {
	f, err := openapiFS.Open(builtinDocPath(gv))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("decompressing OpenAPI document for %s: %w", gv, err)
	}
	return io.ReadAll(zr)
}

// Document returns the OpenAPI v3 document for a group-version as JSON.
func (r *Registry) Document(gv k8sschema.GroupVersion) ([]byte, error) {
	data, _, err := r.document(gv)
	return bytes.Clone(data), err
}

// document is Document without copying, with the document's SHA-256;
// callers must not change the bytes.
func (r *Registry) document(gv k8sschema.GroupVersion) ([]byte, [sha256.Size]byte, error) {
	if data, digest, err := builtinDocument(gv); err == nil {
		return data, digest, nil
	} else if !isNotExist(err) {
		return nil, digest, err
	}
	data, err := r.crdDocument(gv)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	return data, sha256.Sum256(data), nil
}

// crdDocument returns the document of a group-version of custom resources.
func (r *Registry) crdDocument(gv k8sschema.GroupVersion) ([]byte, error) {
	r.docs.mu.Lock()
	if data, ok := r.docs.crdDocs[gv]; ok {
		r.docs.mu.Unlock()
		return data, nil
	}
	r.docs.mu.Unlock()

	var specs []*spec3.OpenAPI
	for _, crd := range r.CRDs() {
		if crd.Spec.Group != gv.Group {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != gv.Version || !v.Served {
				continue
			}
			s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{IncludeSelectableFields: true})
			if err != nil {
				return nil, fmt.Errorf("building OpenAPI for CRD %s version %s: %w", crd.Name, v.Name, err)
			}
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("no OpenAPI document for %s", gv)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, fmt.Errorf("merging OpenAPI documents for %s: %w", gv, err)
	}
	data, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	r.docs.mu.Lock()
	r.docs.crdDocs[gv] = data
	r.docs.mu.Unlock()
	return data, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// TypeConverter returns the structured-merge-diff type converter for a
// group-version, built from its OpenAPI v3 document exactly as the
// MutatingAdmissionPolicy plugin builds it (no deduced atomic lists).
func (r *Registry) TypeConverter(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
	r.docs.mu.Lock()
	if tc, ok := r.docs.converter[gv]; ok {
		r.docs.mu.Unlock()
		return tc, nil
	}
	shared := r.docs.shared
	r.docs.mu.Unlock()
	data, digest, err := r.document(gv)
	if err != nil {
		return nil, err
	}
	build := func() (managedfields.TypeConverter, error) { return newTypeConverter(gv, data) }
	var tc managedfields.TypeConverter
	if shared != nil {
		tc, err = shared.TypeConverter(digest, build)
	} else {
		tc, err = build()
	}
	if err != nil {
		return nil, err
	}
	r.docs.mu.Lock()
	r.docs.converter[gv] = tc
	r.docs.mu.Unlock()
	return tc, nil
}

func newTypeConverter(gv k8sschema.GroupVersion, data []byte) (managedfields.TypeConverter, error) {
	var doc spec3.OpenAPI
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding OpenAPI document for %s: %w", gv, err)
	}
	if doc.Components == nil {
		return nil, fmt.Errorf("OpenAPI document for %s has no schemas", gv)
	}
	tc, err := managedfields.NewTypeConverter(doc.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("building type converter for %s: %w", gv, err)
	}
	return tc, nil
}

// OpenAPIClient returns an openapi.Client over the registry's documents, the
// interface the upstream admission plugins use to fetch schemas.
func (r *Registry) OpenAPIClient() openapi.Client { return openapiClient{r} }

type openapiClient struct{ r *Registry }

func (c openapiClient) Paths() (map[string]openapi.GroupVersion, error) {
	out := map[string]openapi.GroupVersion{}
	c.r.docs.mu.Lock()
	gen := c.r.docs.generation
	c.r.docs.mu.Unlock()
	for _, res := range c.r.Resources() {
		gv := res.GVR.GroupVersion()
		path := "apis/" + gv.Group + "/" + gv.Version
		if gv.Group == "" {
			path = "api/" + gv.Version
		}
		out[path] = groupVersionDoc{r: c.r, gv: gv, url: fmt.Sprintf("/openapi/v3/%s?generation=%d", path, gen)}
	}
	return out, nil
}

type groupVersionDoc struct {
	r   *Registry
	gv  k8sschema.GroupVersion
	url string
}

func (g groupVersionDoc) Schema(contentType string) ([]byte, error) {
	if contentType != "" && contentType != "application/json" {
		return nil, fmt.Errorf("unsupported content type %q", contentType)
	}
	return g.r.Document(g.gv)
}

func (g groupVersionDoc) ServerRelativeURL() string { return g.url }
