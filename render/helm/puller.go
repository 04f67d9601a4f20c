package helm

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/helmpath"
	"helm.sh/helm/v4/pkg/registry"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/truce-dev/truce/render"
)

// DefaultMaxDownloadBytes bounds what one Pull or dependency build may
// download: index files of large public repositories run to tens of MiB,
// chart archives to a few.
const DefaultMaxDownloadBytes = 256 << 20

// Ref names a chart in a repository the way an Argo CD Application source
// (repoURL, chart, targetRevision) or a Flux HelmChart (the HelmRepository's
// URL, chart, version) does.
type Ref struct {
	// RepoURL is an HTTP(S) chart repository (with an index.yaml) or an
	// OCI registry path (oci://registry/path).
	RepoURL string
	// Chart is the chart's name in the repository.
	Chart string
	// Version is an exact version or a semver constraint, resolved as Helm
	// resolves it (the highest matching version); empty is the latest
	// stable version.
	Version string
}

func (r Ref) String() string {
	v := r.Version
	if v == "" {
		v = "(latest)"
	}
	return fmt.Sprintf("chart %s %s from %s", r.Chart, v, redactURL(r.RepoURL))
}

// Puller fetches charts with Helm's own getters, repository index and
// registry client, and keeps them under CacheDir so that fetching the same
// chart version again does not touch the network.
//
// A chart pinned to an exact version that is cached is used without any
// network access. A version constraint is resolved against the
// repository's current index (OCI: its tags) when online, against the
// cached index when offline; OCI constraints cannot be resolved offline.
type Puller struct {
	// CacheDir holds index files and charts; empty is
	// render.DefaultCacheDir().
	CacheDir string
	// Offline forbids the network: what is not cached is Unpredictable.
	Offline bool
	// PlainHTTP talks to OCI registries over HTTP, as Argo CD's
	// insecureOCIForceHttp and Flux's insecure HelmRepository do.
	PlainHTTP bool
	// RegistryConfig is the OCI registry credentials file; empty is Helm's
	// default (its registry config, then Docker's).
	RegistryConfig string
	// RepositoryConfig is a Helm repositories file (repositories.yaml)
	// whose entries give HTTP chart repositories their credentials, by
	// URL; empty reads them anonymously.
	RepositoryConfig string
	// MaxDownloadBytes bounds the bytes one Pull or dependency build
	// reads from the network; zero is DefaultMaxDownloadBytes.
	MaxDownloadBytes int64
}

func (p *Puller) cache() cacheDir {
	dir := p.CacheDir
	if dir == "" {
		dir = render.DefaultCacheDir()
	}
	return cacheDir(filepath.Join(dir, "helm"))
}

// credentials names where OCI registry credentials come from, for
// messages.
func (p *Puller) credentials() string {
	if p.RegistryConfig != "" {
		return "--registry-config " + p.RegistryConfig
	}
	return "Helm's registry config and Docker's config.json"
}

func (p *Puller) maxDownloadBytes() int64 {
	if p.MaxDownloadBytes > 0 {
		return p.MaxDownloadBytes
	}
	return DefaultMaxDownloadBytes
}

// Pull fetches the chart ref names, from the cache when it is there.
// Offline, a chart that is not cached is a *render.Unpredictable naming it.
func (p *Puller) Pull(ctx context.Context, ref Ref) (*Chart, error) {
	if err := ref.validate(); err != nil {
		return nil, err
	}
	if isExactVersion(ref.Version) {
		if ch, ok := loadCached(p.cache().chartPath(ref.RepoURL, ref.Chart, ref.Version)); ok {
			return ch, nil
		}
	}
	s, err := p.newSession(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if registry.IsOCI(ref.RepoURL) {
		return p.pullOCI(s, ref)
	}
	return p.pullHTTP(s, ref)
}

func (r Ref) validate() error {
	if r.Chart == "" || strings.Contains(r.Chart, "..") || strings.HasPrefix(r.Chart, "/") {
		return fmt.Errorf("pulling %s: invalid chart name %q", r, r.Chart)
	}
	u, err := url.Parse(r.RepoURL)
	if err != nil {
		return fmt.Errorf("pulling %s: invalid repository URL: %w", r, err)
	}
	switch u.Scheme {
	case "http", "https", registry.OCIScheme:
		return nil
	}
	return fmt.Errorf("pulling %s: repository URL must be http(s):// or oci://", r)
}

// isExactVersion reports whether v names one version rather than a range.
func isExactVersion(v string) bool {
	_, err := semver.StrictNewVersion(v)
	return err == nil
}

func unpredictable(subject string) error {
	return &render.Unpredictable{Subject: subject, Reason: "needs the network (--offline)"}
}

func (p *Puller) pullHTTP(s *session, ref Ref) (*Chart, error) {
	idx, err := p.repoIndex(s, ref.RepoURL, !isExactVersion(ref.Version), ref.String())
	if err != nil {
		return nil, err
	}
	cv, err := idx.Get(ref.Chart, ref.Version)
	if err != nil && isExactVersion(ref.Version) && !s.offline {
		// The cached index predates the version; look again.
		if idx, err = p.repoIndex(s, ref.RepoURL, true, ref.String()); err == nil {
			cv, err = idx.Get(ref.Chart, ref.Version)
		}
	}
	if err != nil {
		if s.offline {
			// The cached index may predate the version.
			return nil, unpredictable(ref.String())
		}
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("pulling %s: version %s has no downloadable URLs", ref, cv.Version)
	}
	path := p.cache().chartPath(ref.RepoURL, ref.Chart, cv.Version)
	if ch, ok := loadCached(path); ok {
		return ch, nil
	}
	chartURL, err := repo.ResolveReferenceURL(ref.RepoURL, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	u, err := url.Parse(chartURL)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: invalid chart URL %q: %w", ref, chartURL, err)
	}
	g, err := s.providers().ByScheme(u.Scheme)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	entry, err := p.repoEntry(indexName(ref.RepoURL), ref.RepoURL)
	if err != nil {
		return nil, err
	}
	opts, err := s.getterOptions(entry)
	if err != nil {
		return nil, err
	}
	// As helm pull --repo: credentials stay with the repository's host.
	data, err := g.Get(chartURL, append(opts, getter.WithAcceptHeader("application/gzip,application/octet-stream"))...)
	if err != nil {
		if s.offline {
			return nil, unpredictable(ref.String())
		}
		if u := s.unreachable(ref.String()); u != nil {
			return nil, u
		}
		if u := p.refused(s, entry, chartURL, ref.String()); u != nil {
			return nil, u
		}
		return nil, fmt.Errorf("pulling %s: %w", ref, s.explain(err))
	}
	return storeChart(path, data.Bytes(), ref)
}

// repoIndex returns the index of a chart repository: the cached one unless
// fresh is set or there is none, else downloaded (and cached) as Helm's
// repository code does. subject names what needed it, for Unpredictable.
func (p *Puller) repoIndex(s *session, repoURL string, fresh bool, subject string) (*repo.IndexFile, error) {
	path, err := p.indexFile(s, repoURL, fresh, subject)
	if err != nil {
		return nil, err
	}
	idx, err := repo.LoadIndexFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the index of %s: %w", redactURL(repoURL), err)
	}
	return idx, nil
}

// indexFile returns the path of the repository's index in the cache.
func (p *Puller) indexFile(s *session, repoURL string, fresh bool, subject string) (string, error) {
	name := indexName(repoURL)
	path := filepath.Join(p.cache().index(), helmpath.CacheIndexFile(name))
	if (!fresh || s.offline) && exists(path) {
		return path, nil
	}
	if s.offline {
		return "", unpredictable(subject)
	}
	entry, err := p.repoEntry(name, repoURL)
	if err != nil {
		return "", err
	}
	t, err := s.transportFor(entry)
	if err != nil {
		return "", err
	}
	r, err := repo.NewChartRepository(entry, s.uncachedProviders(t))
	if err != nil {
		return "", fmt.Errorf("%s: %w", subject, err)
	}
	r.CachePath = p.cache().index()
	if _, err := r.DownloadIndexFile(); err != nil {
		if u := s.unreachable(subject); u != nil {
			return "", u
		}
		if u := p.refused(s, entry, strings.TrimSuffix(repoURL, "/")+"/index.yaml", subject); u != nil {
			return "", u
		}
		// Helm's wording, which Argo CD's messages key on.
		return "", fmt.Errorf("%s: looks like %q is not a valid chart repository or cannot be reached: %w",
			subject, redactURL(repoURL), s.explain(err))
	}
	return path, nil
}

func (p *Puller) pullOCI(s *session, ref Ref) (*Chart, error) {
	if s.offline {
		return nil, unpredictable(ref.String())
	}
	dl := downloader.ChartDownloader{Out: io.Discard, Getters: s.providers(), RegistryClient: s.registry}
	chartRef := strings.TrimSuffix(ref.RepoURL, "/") + "/" + ref.Chart
	_, u, err := dl.ResolveChartVersion(chartRef, ref.Version)
	if err != nil {
		if un := s.unreachable(ref.String()); un != nil {
			return nil, un
		}
		if un := s.denied(ref.String(), p.credentials()); un != nil {
			return nil, un
		}
		return nil, fmt.Errorf("pulling %s: %w", ref, s.explain(err))
	}
	version := ref.Version
	if i := strings.LastIndexByte(u.Path, ':'); i >= 0 && !strings.Contains(u.Path, "@") {
		version = u.Path[i+1:]
	}
	path := p.cache().chartPath(ref.RepoURL, ref.Chart, version)
	if ch, ok := loadCached(path); ok {
		return ch, nil
	}
	g, err := s.providers().ByScheme(registry.OCIScheme)
	if err != nil {
		return nil, err
	}
	data, err := g.Get(u.String(), getter.WithRegistryClient(s.registry))
	if err != nil {
		if un := s.unreachable(ref.String()); un != nil {
			return nil, un
		}
		if un := s.denied(ref.String(), p.credentials()); un != nil {
			return nil, un
		}
		return nil, fmt.Errorf("pulling %s: %w", ref, s.explain(err))
	}
	return storeChart(path, data.Bytes(), ref)
}

// loadCached loads a pulled chart from the cache; a missing or unreadable
// archive is a miss.
func loadCached(path string) (*Chart, bool) {
	if !exists(path) {
		return nil, false
	}
	ch, err := LoadArchive(path)
	if err != nil {
		return nil, false
	}
	ch, err = unpacked(path, ch)
	if err != nil {
		return nil, false
	}
	return ch, true
}

// storeChart keeps data at path and loads it; data that is not a chart is
// not kept.
func storeChart(path string, data []byte, ref Ref) (*Chart, error) {
	if err := writeFileAtomic(path, data); err != nil {
		return nil, err
	}
	ch, err := LoadArchive(path)
	if err == nil {
		ch, err = unpacked(path, ch)
	}
	if err != nil {
		os.RemoveAll(filepath.Dir(path))
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	return ch, nil
}

// unpacked gives a pulled chart the directory its archive is unpacked in
// (with Helm's own unpacking), next to the archive: Argo CD renders a
// pulled chart from such a directory, where its values files are read
// from, and Sources then name real files. The chart itself stays as
// loaded from the archive.
func unpacked(path string, ch *Chart) (*Chart, error) {
	dir := filepath.Join(filepath.Dir(path), "src")
	chartDir := filepath.Join(dir, ch.Name())
	if !exists(filepath.Join(chartDir, "Chart.yaml")) {
		tmp, err := os.MkdirTemp(filepath.Dir(path), ".unpack-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := chartutil.ExpandFile(tmp, path); err != nil {
			return nil, fmt.Errorf("unpacking %s: %w", path, err)
		}
		if err := os.Rename(tmp, dir); err != nil && !exists(filepath.Join(chartDir, "Chart.yaml")) {
			// A half-unpacked directory left by an interrupted run.
			os.RemoveAll(dir)
			if err := os.Rename(tmp, dir); err != nil {
				return nil, fmt.Errorf("unpacking %s: %w", path, err)
			}
		}
	}
	out := *ch
	out.Dir = chartDir
	return &out, nil
}
