package helm

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/truce-dev/truce/manifest"
)

// Chart is a loaded Helm chart and where it came from.
type Chart struct {
	// Dir is the chart's directory, or the archive it was loaded from.
	// Rendered objects' Sources are files under it.
	Dir string
	// Chart is the chart as Helm loaded it, dependencies included. Render
	// never changes it: Helm's dependency processing rewrites the chart it
	// is given, so every render works on a copy.
	Chart *chart.Chart
}

// Name is the chart's name from Chart.yaml.
func (c *Chart) Name() string { return c.Chart.Name() }

// Version is the chart's version from Chart.yaml.
func (c *Chart) Version() string { return c.Chart.Metadata.Version }

func (c *Chart) String() string { return fmt.Sprintf("Helm chart %s (%s)", c.Name(), c.Dir) }

// LoadOptions direct Load.
type LoadOptions struct {
	// Puller fetches dependencies missing from charts/; nil makes a missing
	// dependency an error, as helm template without helm dependency build.
	Puller *Puller
	// RepositoryRoot bounds what the chart may reach through symlinks and
	// file:// dependencies. Empty is the top of the Git work tree holding
	// the chart, else the chart directory.
	RepositoryRoot string
	// RepositoryAliases resolve dependencies whose repository is "@name"
	// or "alias:name": the Helm repositories configured in Argo CD by name.
	RepositoryAliases map[string]string
}

// Load loads the chart in dir, a directory with a Chart.yaml, the way
// Argo CD's repo server does: with Helm's loader, dependencies from
// charts/ (directories and archives). When Chart.yaml lists a dependency
// that charts/ lacks, it runs Helm's dependency build (downloader.Manager,
// as helm dependency build does, honouring Chart.lock) through opts.Puller,
// on a scratch copy so that the repository is never written to. Offline,
// a dependency that is not cached is a *render.Unpredictable naming it.
func Load(ctx context.Context, dir string, opts LoadOptions) (*Chart, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, root, err := chartRoot(dir, opts.RepositoryRoot)
	if err != nil {
		return nil, err
	}
	if err := checkSymlinks(abs, root); err != nil {
		return nil, err
	}
	c, err := loader.Load(abs)
	if err != nil {
		return nil, fmt.Errorf("loading Helm chart %s: %w", dir, err)
	}
	ch, err := fromCharter(abs, c)
	if err != nil {
		return nil, err
	}
	if err := checkDependencies(ch.Chart); err == nil {
		return ch, nil
	} else if opts.Puller == nil {
		return nil, fmt.Errorf("loading %s: %w (helm dependency build was not run: no chart puller)", ch, err)
	}
	built, err := opts.Puller.buildDependencies(ctx, ch, root, opts.RepositoryAliases)
	if err != nil {
		return nil, err
	}
	if err := checkDependencies(built); err != nil {
		return nil, fmt.Errorf("loading %s after helm dependency build: %w", ch, err)
	}
	ch.Chart = built
	return ch, nil
}

// LoadArchive loads a chart archive (.tgz), such as one Pull stored.
func LoadArchive(path string) (*Chart, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("loading Helm chart archive: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("loading Helm chart archive %s: is a directory", path)
	}
	c, err := loader.Load(abs)
	if err != nil {
		return nil, fmt.Errorf("loading Helm chart archive %s: %w", path, err)
	}
	return fromCharter(abs, c)
}

// fromCharter accepts the chart API versions Helm's install action renders.
func fromCharter(dir string, c ci.Charter) (*Chart, error) {
	ch, ok := c.(*chart.Chart)
	if !ok {
		return nil, fmt.Errorf("loading Helm chart %s: only charts of apiVersion v1 and v2 can be rendered", dir)
	}
	return &Chart{Dir: dir, Chart: ch}, nil
}

// chartRoot returns dir and the repository root, both absolute with
// symlinks resolved, after checking that dir is inside the root.
func chartRoot(dir, root string) (string, string, error) {
	abs, err := realPath(dir)
	if err != nil {
		return "", "", fmt.Errorf("loading Helm chart %s: %w", dir, err)
	}
	if root == "" {
		if root, err = manifest.RepositoryRoot(abs); err != nil {
			return "", "", fmt.Errorf("loading Helm chart %s: repository root: %w", dir, err)
		}
	}
	rootReal, err := realPath(root)
	if err != nil {
		return "", "", fmt.Errorf("loading Helm chart %s: repository root: %w", dir, err)
	}
	if !within(rootReal, abs) {
		return "", "", fmt.Errorf("loading Helm chart %s: not inside the repository root %s", dir, rootReal)
	}
	return abs, rootReal, nil
}

func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// within reports whether p is root or below it; both must be clean and
// absolute.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// checkSymlinks refuses a chart with a symlink that leads out of the
// repository, as Argo CD refuses out-of-bounds symlinks: Helm's loader
// follows symlinks, and a chart must not read the rest of the disk.
func checkSymlinks(dir, root string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("loading Helm chart %s: %w", dir, err)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil // dangling: Helm's loader reports it if it matters
		}
		if !within(root, target) {
			return fmt.Errorf("loading Helm chart %s: symlink %s points outside the repository root %s", dir, p, root)
		}
		return nil
	})
}

// cloneChart copies what Helm's dependency processing and rendering change
// (metadata dependencies, values, the dependency tree), sharing the file
// contents, which they only read.
func cloneChart(c *chart.Chart) *chart.Chart {
	out := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = make([]*chart.Dependency, len(c.Metadata.Dependencies))
		for i, d := range c.Metadata.Dependencies {
			dd := *d
			dd.Tags = append([]string(nil), d.Tags...)
			dd.ImportValues = append([]any(nil), d.ImportValues...)
			md.Dependencies[i] = &dd
		}
		out.Metadata = &md
	}
	out.Values = copyValues(c.Values)
	deps := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, cloneChart(d))
	}
	out.SetDependencies(deps...)
	return &out
}

// copyValues deep-copies a values tree: maps and lists are copied,
// scalars shared.
func copyValues(v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = copyValue(x)
	}
	return out
}

func copyValue(x any) any {
	switch x := x.(type) {
	case map[string]any:
		return copyValues(x)
	case common.Values:
		return common.Values(copyValues(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	}
	return x
}
