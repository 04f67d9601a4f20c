package flux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/truce-dev/truce/render"
)

// Layer operations of an OCIRepository's spec.layerSelector.
const (
	OCILayerExtract = "extract"
	OCILayerCopy    = "copy"
)

// HelmChartLayerMediaType is the layer helm push writes a chart into.
const HelmChartLayerMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

// DefaultMaxOCIBytes bounds the layer one OCIPuller.Pull downloads.
const DefaultMaxOCIBytes = 256 << 20

// maxManifestBytes bounds an OCI manifest, as oras-go's default does.
const maxManifestBytes = 4 << 20

// OCIRepository is a source.toolkit.fluxcd.io OCIRepository, as far as
// pulling its artifact goes.
type OCIRepository struct {
	// Name is "namespace/name", for errors.
	Name string
	// URL is spec.url: oci://host[:port]/repository.
	URL string
	// Tag, SemVer, SemVerFilter and Digest are spec.ref; Digest wins
	// over SemVer, SemVer over Tag; none is the tag "latest".
	Tag, SemVer, SemVerFilter, Digest string
	// MediaType and Operation are spec.layerSelector: the first layer
	// of that media type (empty: the first layer), extracted (a
	// tar+gzip layer, the default) or copied as it is.
	MediaType, Operation string
	// Insecure is spec.insecure: the registry speaks plain HTTP.
	Insecure bool
	// SecretRef is spec.secretRef.name, a docker-registry Secret; Provider
	// is spec.provider (generic, aws, azure, gcp): where source-controller
	// takes the registry's credentials from.
	SecretRef, Provider string
	// credentials says where the credentials sent came from, for
	// messages.
	credentials string
}

// ParseOCIRepository reads an OCIRepository object's spec.
func ParseOCIRepository(namespace, name string, spec map[string]any) (*OCIRepository, error) {
	var s struct {
		URL string `json:"url"`
		Ref struct {
			Tag          string `json:"tag"`
			SemVer       string `json:"semver"`
			SemVerFilter string `json:"semverFilter"`
			Digest       string `json:"digest"`
		} `json:"ref"`
		LayerSelector struct {
			MediaType string `json:"mediaType"`
			Operation string `json:"operation"`
		} `json:"layerSelector"`
		Insecure  bool `json:"insecure"`
		SecretRef struct {
			Name string `json:"name"`
		} `json:"secretRef"`
		Provider string `json:"provider"`
	}
	data, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil {
		return nil, fmt.Errorf("reading OCIRepository %s/%s: %w", namespace, name, err)
	}
	return &OCIRepository{Name: namespace + "/" + name, URL: s.URL, Tag: s.Ref.Tag, SemVer: s.Ref.SemVer, SemVerFilter: s.Ref.SemVerFilter,
		Digest: s.Ref.Digest, MediaType: s.LayerSelector.MediaType, Operation: s.LayerSelector.Operation, Insecure: s.Insecure,
		SecretRef: s.SecretRef.Name, Provider: s.Provider}, nil
}

// subject names the repository in errors.
func (r *OCIRepository) subject() string { return "OCIRepository " + r.Name }

// OCIArtifact is the layer an OCIRepository selects, pulled.
type OCIArtifact struct {
	// Path is the layer's file in the cache, as downloaded.
	Path string
	// Extract is whether the layer is to be extracted (a tar+gzip) or
	// is the artifact itself; both end up unpacked by the controllers
	// that read the artifact.
	Extract bool
	// Revision is source-controller's: tag@sha256:<manifest digest>, or
	// the digest alone.
	Revision string
}

// OCIPuller pulls OCIRepository artifacts with oras-go, keeping layers
// under CacheDir/oci: blobs by digest, and what each URL and tag or digest
// resolved to, so that offline the last pull of a tag or digest is used.
// A semver range needs the registry's tags: offline it is Unpredictable.
// Registries get the credentials of RegistryConfig.
type OCIPuller struct {
	CacheDir string
	Offline  bool
	// RegistryConfig is the registry credentials file (truce's
	// --registry-config); empty is Helm's, as `helm registry login`
	// writes it. Docker's config.json is read after it, as Helm does.
	RegistryConfig string
	// SecretConfig, when set, is the docker config of the OCIRepository's
	// spec.secretRef Secret, written to a file: its credentials alone are
	// sent, as source-controller sends them, and SecretName names it in
	// messages.
	SecretConfig, SecretName string
	// MaxBytes bounds the layer downloaded; zero is DefaultMaxOCIBytes.
	MaxBytes int64
}

// ociResolution is what the cache keeps per URL and reference.
type ociResolution struct {
	Revision string             `json:"revision"`
	Layer    ocispec.Descriptor `json:"layer"`
}

// Pull resolves r's reference, selects its layer and downloads it (once
// per digest). A reference the registry does not have, a range no tag
// meets, or a layer the manifest does not hold is the error
// source-controller reports; a registry that cannot be reached, or the
// network while offline, is *render.Unpredictable.
func (p *OCIPuller) Pull(ctx context.Context, r *OCIRepository) (*OCIArtifact, error) {
	ref, err := r.reference()
	if err != nil {
		return nil, err
	}
	switch r.Operation {
	case "", OCILayerExtract, OCILayerCopy:
	default:
		return nil, fmt.Errorf("%s: layerSelector.operation %q is neither extract nor copy", r.subject(), r.Operation)
	}
	key := strings.Join([]string{r.URL, r.Tag, r.SemVer, r.SemVerFilter, r.Digest, r.MediaType}, "\x00")
	if p.Offline {
		if r.Digest == "" && r.SemVer != "" {
			return nil, &render.Unpredictable{Subject: r.subject() + " (" + r.URL + ")", Reason: "resolving semver " + r.SemVer + " needs the registry's tags (--offline)"}
		}
		if res, ok := p.cached(key); ok {
			return p.artifact(r, res), nil
		}
		return nil, &render.Unpredictable{Subject: r.subject() + " (" + r.URL + ")", Reason: "needs the network (--offline)"}
	}
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid url %q: %w", r.subject(), r.URL, err)
	}
	repo.PlainHTTP = r.Insecure
	switch {
	case p.SecretConfig != "":
		repo.Client, err = registryClient(p.SecretConfig, false)
		r.credentials = p.SecretName
	default:
		repo.Client, err = registryClient(p.RegistryConfig, true)
		r.credentials = "Helm's registry config and Docker's config.json"
		if p.RegistryConfig != "" {
			r.credentials = "--registry-config " + p.RegistryConfig
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.subject(), err)
	}
	res, err := p.resolve(ctx, repo, r, ref)
	if err != nil {
		return nil, err
	}
	if err := p.download(ctx, repo, r, res.Layer); err != nil {
		return nil, err
	}
	if err := p.store(key, res); err != nil {
		return nil, err
	}
	return p.artifact(r, res), nil
}

// reference parses r.URL.
func (r *OCIRepository) reference() (registry.Reference, error) {
	rest, ok := strings.CutPrefix(r.URL, "oci://")
	if !ok {
		return registry.Reference{}, fmt.Errorf("%s: url %q must start with oci://", r.subject(), r.URL)
	}
	ref, err := registry.ParseReference(strings.TrimSuffix(rest, "/"))
	if err != nil || ref.Reference != "" {
		return registry.Reference{}, fmt.Errorf("%s: invalid url %q: a registry and repository without tag or digest are expected", r.subject(), r.URL)
	}
	return ref, nil
}

// unreachable is err as Unpredictable, unless the registry answered that
// what was asked for is not there.
func (r *OCIRepository) failed(ctx context.Context, doing string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("%s: %s: %w", r.subject(), doing, err)
	}
	if refused(err) {
		// The cluster may hold credentials truce does not: the
		// artifact is unknown, not missing.
		return &render.Unpredictable{Subject: r.subject() + " (" + r.URL + ")", Reason: fmt.Sprintf("the registry refused access with the credentials of %s%s: %s: %v", r.credentials, r.clusterCredentials(), doing, err)}
	}
	return &render.Unpredictable{Subject: r.subject() + " (" + r.URL + ")", Reason: "cannot be pulled: " + doing + ": " + err.Error()}
}

// resolve finds the manifest r's reference names and selects its layer,
// as source-controller does.
func (p *OCIPuller) resolve(ctx context.Context, repo *remote.Repository, r *OCIRepository, ref registry.Reference) (ociResolution, error) {
	tag := r.Tag
	switch {
	case r.Digest != "":
		tag = ""
	case r.SemVer != "":
		tags, err := registry.Tags(ctx, repo)
		if err != nil {
			return ociResolution{}, r.failed(ctx, "listing tags", err)
		}
		if tag, err = semverTag(tags, r.SemVer, r.SemVerFilter); err != nil {
			return ociResolution{}, fmt.Errorf("%s: %w", r.subject(), err)
		}
	case tag == "":
		tag = "latest"
	}
	reference := tag
	if r.Digest != "" {
		if _, err := digest.Parse(r.Digest); err != nil {
			return ociResolution{}, fmt.Errorf("%s: invalid digest %q: %w", r.subject(), r.Digest, err)
		}
		reference = r.Digest
	}
	desc, rc, err := repo.FetchReference(ctx, reference)
	if err != nil {
		return ociResolution{}, r.failed(ctx, fmt.Sprintf("failed to determine artifact digest of %s:%s", ref.Registry+"/"+ref.Repository, reference), err)
	}
	defer rc.Close()
	if desc.Size > maxManifestBytes {
		return ociResolution{}, fmt.Errorf("%s: the manifest is %d bytes, more than the limit of %d", r.subject(), desc.Size, maxManifestBytes)
	}
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return ociResolution{}, r.failed(ctx, "reading the manifest", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return ociResolution{}, fmt.Errorf("%s: the manifest of %s is not an OCI image manifest: %w", r.subject(), reference, err)
	}
	layer, err := selectLayer(m.Layers, r.MediaType)
	if err != nil {
		return ociResolution{}, fmt.Errorf("%s: %w", r.subject(), err)
	}
	revision := desc.Digest.String()
	if r.Digest == "" {
		revision = tag + "@" + revision
	}
	return ociResolution{Revision: revision, Layer: layer}, nil
}

// selectLayer is source-controller's choice: the first layer of the
// media type, else the first layer.
func selectLayer(layers []ocispec.Descriptor, mediaType string) (ocispec.Descriptor, error) {
	if len(layers) == 0 {
		return ocispec.Descriptor{}, errors.New("no layers found in artifact")
	}
	if mediaType == "" {
		return layers[0], nil
	}
	for _, l := range layers {
		if l.MediaType == mediaType {
			return l, nil
		}
	}
	return ocispec.Descriptor{}, fmt.Errorf("failed to find layer with media type '%s' in artifact", mediaType)
}

// semverTag is the highest tag meeting constraint among those matching
// filter (a regular expression; empty: all), as source-controller picks
// it: tags that parse strictly as versions, a leading v allowed.
func semverTag(tags []string, constraint, filter string) (string, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("semver '%s' parse error: %w", constraint, err)
	}
	var re *regexp.Regexp
	if filter != "" {
		if re, err = regexp.Compile(filter); err != nil {
			return "", fmt.Errorf("semver filter '%s' parse error: %w", filter, err)
		}
	}
	var matched []*semver.Version
	for _, t := range tags {
		if re != nil && !re.MatchString(t) {
			continue
		}
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(t, "v")); err != nil {
			continue
		}
		v, err := semver.NewVersion(t)
		if err == nil && c.Check(v) {
			matched = append(matched, v)
		}
	}
	if len(matched) == 0 {
		return "", fmt.Errorf("no match found for semver: %s", constraint)
	}
	sort.Stable(sort.Reverse(semver.Collection(matched)))
	return matched[0].Original(), nil
}

func (p *OCIPuller) dir() string {
	dir := p.CacheDir
	if dir == "" {
		dir = render.DefaultCacheDir()
	}
	return filepath.Join(dir, "oci")
}

func (p *OCIPuller) blobPath(d digest.Digest) string {
	return filepath.Join(p.dir(), "blobs", d.Algorithm().String(), d.Encoded())
}

func (p *OCIPuller) refPath(key string) string {
	return filepath.Join(p.dir(), "refs", digest.FromString(key).Encoded()+".json")
}

func (p *OCIPuller) artifact(r *OCIRepository, res ociResolution) *OCIArtifact {
	return &OCIArtifact{Path: p.blobPath(res.Layer.Digest), Extract: r.Operation != OCILayerCopy, Revision: res.Revision}
}

// cached is the last resolution of key whose layer is in the cache.
func (p *OCIPuller) cached(key string) (ociResolution, bool) {
	data, err := os.ReadFile(p.refPath(key))
	if err != nil {
		return ociResolution{}, false
	}
	var res ociResolution
	if json.Unmarshal(data, &res) != nil || res.Layer.Digest.Validate() != nil {
		return ociResolution{}, false
	}
	if info, err := os.Stat(p.blobPath(res.Layer.Digest)); err != nil || info.Size() != res.Layer.Size {
		return ociResolution{}, false
	}
	return res, true
}

func (p *OCIPuller) store(key string, res ociResolution) error {
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return writeAtomic(p.refPath(key), func(w io.Writer) error { _, err := w.Write(data); return err })
}

// download fetches layer into the cache unless it is there, checking
// its size and digest.
func (p *OCIPuller) download(ctx context.Context, repo *remote.Repository, r *OCIRepository, layer ocispec.Descriptor) error {
	if err := layer.Digest.Validate(); err != nil {
		return fmt.Errorf("%s: the layer's digest: %w", r.subject(), err)
	}
	path := p.blobPath(layer.Digest)
	if info, err := os.Stat(path); err == nil && info.Size() == layer.Size {
		return nil
	}
	limit := p.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxOCIBytes
	}
	if layer.Size > limit {
		return fmt.Errorf("%s: the layer is %d bytes, more than the limit of %d", r.subject(), layer.Size, limit)
	}
	rc, err := repo.Fetch(ctx, layer)
	if err != nil {
		return r.failed(ctx, "fetching layer "+layer.Digest.String(), err)
	}
	defer rc.Close()
	return writeAtomic(path, func(w io.Writer) error {
		vr := content.NewVerifyReader(rc, layer)
		if _, err := io.Copy(w, vr); err != nil {
			return r.failed(ctx, "fetching layer "+layer.Digest.String(), err)
		}
		if err := vr.Verify(); err != nil {
			return fmt.Errorf("%s: layer %s: %w", r.subject(), layer.Digest, err)
		}
		return nil
	})
}

// writeAtomic writes path through a temporary file in its directory, so
// that truce processes sharing the cache never see half a file.
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing to the cache: %w", err)
	}
	defer os.Remove(f.Name())
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// clusterCredentials says what credentials source-controller would have
// that truce did not use, for a refusal's message.
func (r *OCIRepository) clusterCredentials() string {
	var notes []string
	if r.Provider != "" && r.Provider != "generic" {
		notes = append(notes, fmt.Sprintf("spec.provider %s signs in with the cluster's cloud identity, which truce does not have", r.Provider))
	}
	if r.SecretRef != "" && !strings.HasPrefix(r.credentials, "Secret ") {
		notes = append(notes, fmt.Sprintf("spec.secretRef %s is not in the repository as plain data: pass its .dockerconfigjson with --registry-config", r.SecretRef))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}
