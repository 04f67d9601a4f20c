package helm

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/helmpath"
	"helm.sh/helm/v4/pkg/registry"
	"helm.sh/helm/v4/pkg/repo/v1"
)

// buildDependencies runs helm dependency build for ch the way Argo CD's
// repo server does (every dependency repository added first, indexes
// refreshed, then downloader.Manager.Build, which follows Chart.lock when
// there is one and resolves Chart.yaml's constraints when not), and
// returns the chart loaded with its dependencies.
//
// Helm's Manager writes charts/ and Chart.lock into the chart it builds,
// so it runs on a scratch mirror of the repository (see mirrorChart), and
// relative file:// dependencies still resolve.
func (p *Puller) buildDependencies(ctx context.Context, ch *Chart, root string, aliases map[string]string) (*chart.Chart, error) {
	deps := dependencyList(ch.Chart)
	for _, d := range deps {
		if err := checkFileDependency(ch, root, d); err != nil {
			return nil, err
		}
	}
	s, err := p.newSession(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	tmp, err := os.MkdirTemp("", "truce-helm-deps-")
	if err != nil {
		return nil, fmt.Errorf("helm dependency build of %s: %w", ch, err)
	}
	defer os.RemoveAll(tmp)
	work, err := mirrorChart(filepath.Join(tmp, "repo"), root, ch.Dir)
	if err != nil {
		return nil, fmt.Errorf("helm dependency build of %s: preparing a scratch copy: %w", ch, err)
	}
	repoConfig := filepath.Join(tmp, "helm", "repositories.yaml")
	repoCache := filepath.Join(tmp, "helm", "repository")
	if err := p.addRepositories(s, ch, deps, aliases, repoConfig, repoCache); err != nil {
		return nil, err
	}
	m := &downloader.Manager{
		Out:              io.Discard,
		ChartPath:        work,
		Verify:           downloader.VerifyNever,
		SkipUpdate:       true, // addRepositories fetched the indexes
		Getters:          s.providers(),
		RegistryClient:   s.registry,
		RepositoryConfig: repoConfig,
		RepositoryCache:  repoCache,
		ContentCache:     filepath.Join(tmp, "helm", "content"),
	}
	if err := m.Build(); err != nil {
		if refused := s.refusedURLs(); len(refused) > 0 {
			return nil, unpredictable(dependencySubject(ch, dependencyFor(refused[0], deps)))
		}
		if u := s.unreachable("dependencies of " + ch.String()); u != nil {
			return nil, u
		}
		if u := s.denied("dependencies of "+ch.String(), p.credentials()); u != nil {
			return nil, u
		}
		return nil, fmt.Errorf("helm dependency build of %s: %w", ch, s.explain(err))
	}
	built, err := loader.Load(work)
	if err != nil {
		return nil, fmt.Errorf("loading %s after helm dependency build: %w", ch, err)
	}
	out, err := fromCharter(ch.Dir, built)
	if err != nil {
		return nil, err
	}
	return out.Chart, nil
}

// dependencyList is Chart.yaml's dependencies followed by Chart.lock's,
// which name the versions a build fetches.
func dependencyList(c *chart.Chart) []*chart.Dependency {
	deps := append([]*chart.Dependency(nil), c.Metadata.Dependencies...)
	if c.Lock != nil {
		deps = append(deps, c.Lock.Dependencies...)
	}
	return deps
}

// addRepositories writes the repositories.yaml and index cache Helm's
// Manager reads: one entry per HTTP(S) dependency repository, as Argo CD
// runs helm repo add for each before helm dependency build.
func (p *Puller) addRepositories(s *session, ch *Chart, deps []*chart.Dependency, aliases map[string]string, config, cache string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	rf := repo.NewFile()
	for _, d := range deps {
		r := d.Repository
		if r == "" || strings.HasPrefix(r, "file://") || registry.IsOCI(r) {
			continue
		}
		name, repoURL := indexName(r), r
		if alias, ok := strings.CutPrefix(r, "@"); ok || strings.HasPrefix(r, "alias:") {
			if !ok {
				alias = strings.TrimPrefix(r, "alias:")
			}
			target, known := aliases[alias]
			if !known {
				return fmt.Errorf("helm dependency build of %s: dependency %s refers to the Helm repository %q by name; its URL is configured in Argo CD, not in the chart (LoadOptions.RepositoryAliases)", ch, d.Name, r)
			}
			name, repoURL = alias, target
		}
		if rf.Has(name) {
			continue
		}
		index, err := p.indexFile(s, repoURL, true, dependencySubject(ch, d))
		if err != nil {
			return err
		}
		if err := copyFile(index, filepath.Join(cache, helmpath.CacheIndexFile(name))); err != nil {
			return fmt.Errorf("helm dependency build of %s: %w", ch, err)
		}
		entry, err := p.repoEntry(name, repoURL)
		if err != nil {
			return err
		}
		rf.Add(entry)
	}
	return rf.WriteFile(config, 0o600)
}

// checkFileDependency refuses a file:// dependency outside the repository.
func checkFileDependency(ch *Chart, root string, d *chart.Dependency) error {
	p, ok := strings.CutPrefix(d.Repository, "file://")
	if !ok {
		return nil
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(ch.Dir, p)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	if !within(root, filepath.Clean(p)) {
		return fmt.Errorf("loading %s: dependency %s (%s) is outside the repository root %s", ch, d.Name, d.Repository, root)
	}
	return nil
}

// dependencySubject names a dependency for Unpredictable.
func dependencySubject(ch *Chart, d *chart.Dependency) string {
	if d == nil {
		return "dependencies of " + ch.String()
	}
	return fmt.Sprintf("%s (dependency of %s)", Ref{RepoURL: d.Repository, Chart: d.Name, Version: d.Version}, ch)
}

// dependencyFor finds the dependency whose repository a refused URL
// belongs to.
func dependencyFor(refused string, deps []*chart.Dependency) *chart.Dependency {
	ru, err := url.Parse(refused)
	if err != nil {
		return nil
	}
	var byHost *chart.Dependency
	for _, d := range deps {
		du, err := url.Parse(d.Repository)
		if err != nil || du.Host == "" || du.Host != ru.Host {
			continue
		}
		base := strings.TrimSuffix(du.Path, "/")
		if strings.HasPrefix(ru.Path, base+"/") || strings.HasPrefix(ru.Path, "/v2"+base+"/"+d.Name+"/") {
			return d
		}
		if byHost == nil {
			byHost = d
		}
	}
	return byHost
}

// mirrorChart builds, at dst, the repository at root as seen from chartDir:
// the directories from root down to chartDir are real, their other entries
// symlinks to the originals (for relative file:// dependencies), and
// chartDir is a copy, which Helm's Manager may write charts/ and
// Chart.lock into. The copy is real rather than symlinks because Helm's
// loader logs every symlink it follows.
func mirrorChart(dst, root, chartDir string) (string, error) {
	rel, err := filepath.Rel(root, chartDir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	cur := root
	if rel != "." {
		for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
			if err := linkEntries(cur, dst, part); err != nil {
				return "", err
			}
			cur, dst = filepath.Join(cur, part), filepath.Join(dst, part)
			// The next level's siblings are linked inside it.
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return "", err
			}
		}
	}
	budget := archive.MaxDecompressedChartSize
	return dst, copyTree(cur, dst, &budget)
}

// copyTree copies the directory src to dst. Symlinks (already checked to
// stay in the repository) are recreated pointing at their targets; budget
// bounds the bytes copied.
func copyTree(src, dst string, budget *int64) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling, as the loader would skip it
			}
			return os.Symlink(real, target)
		case !d.Type().IsRegular():
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if *budget -= fi.Size(); *budget < 0 {
			return fmt.Errorf("the chart directory is larger than Helm's %s limit for a chart", formatBytes(archive.MaxDecompressedChartSize))
		}
		return copyFile(p, target)
	})
}

// linkEntries symlinks every entry of src into dst except skip.
func linkEntries(src, dst, skip string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == skip {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
