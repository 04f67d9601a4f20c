package helm

import (
	"os"
	"path/filepath"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"
)

// sourceMapper turns the template paths Helm writes in "# Source:" comments
// (chartname/charts/sub/templates/x.yaml) into files on disk under the
// chart directory (dir/charts/sub/templates/x.yaml).
//
// A subchart's path in Helm's output uses its alias, and its directory in
// charts/ need not be named after it; the mapper finds it by the name and
// version in its Chart.yaml. A subchart that exists only as an archive
// (charts/sub-1.0.0.tgz, or one fetched by helm dependency build) maps to
// a path inside that archive.
type sourceMapper struct {
	dir     string
	root    *chart.Chart // as loaded: Helm's rendering renames aliased subcharts
	entries map[string][]chartEntry
}

// chartEntry is one subchart in a charts/ directory on disk.
type chartEntry struct {
	path          string
	name, version string
}

func newSourceMapper(dir string, loaded *chart.Chart) *sourceMapper {
	return &sourceMapper{dir: dir, root: loaded, entries: map[string][]chartEntry{}}
}

func (m *sourceMapper) file(helmPath string) string {
	parts := strings.Split(helmPath, "/")
	disk, ch := m.dir, m.root
	i := 1
	for i+1 < len(parts) && parts[i] == "charts" {
		name := realName(ch, parts[i+1])
		sub := dependencyNamed(ch, name)
		if sub == nil {
			break
		}
		disk = m.subchartDir(disk, name, sub.Metadata.Version)
		ch = sub
		i += 2
	}
	i = min(i, len(parts))
	return filepath.Join(disk, filepath.FromSlash(strings.Join(parts[i:], "/")))
}

// dependencyNamed is the subchart of ch with that name in its Chart.yaml.
func dependencyNamed(ch *chart.Chart, name string) *chart.Chart {
	for _, d := range ch.Dependencies() {
		if d.Name() == name {
			return d
		}
	}
	return nil
}

// realName undoes an alias: the name, in its own Chart.yaml, of the
// subchart parent renders under name.
func realName(parent *chart.Chart, name string) string {
	for _, d := range parent.Metadata.Dependencies {
		if d.Alias != "" && d.Alias == name {
			return d.Name
		}
	}
	return name
}

// subchartDir finds the subchart name at version in parent's charts/.
func (m *sourceMapper) subchartDir(parent, name, version string) string {
	for _, e := range m.chartsOf(parent) {
		if e.name == name && e.version == version {
			return e.path
		}
	}
	return filepath.Join(parent, "charts", name+"-"+version+".tgz")
}

// chartsOf lists the subcharts in dir/charts: directories by their
// Chart.yaml, archives by Helm's name-version.tgz convention (every split
// at a hyphen is a candidate, as versions may hold hyphens too).
func (m *sourceMapper) chartsOf(dir string) []chartEntry {
	if e, ok := m.entries[dir]; ok {
		return e
	}
	var out []chartEntry
	charts := filepath.Join(dir, "charts")
	entries, _ := os.ReadDir(charts)
	for _, e := range entries {
		p := filepath.Join(charts, e.Name())
		if base, ok := strings.CutSuffix(e.Name(), ".tgz"); ok {
			for j := strings.IndexByte(base, '-'); j > 0; {
				out = append(out, chartEntry{path: p, name: base[:j], version: base[j+1:]})
				k := strings.IndexByte(base[j+1:], '-')
				if k < 0 {
					break
				}
				j += k + 1
			}
			continue
		}
		data, err := readSmall(filepath.Join(p, "Chart.yaml"))
		if err != nil {
			continue
		}
		var md struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		if yaml.Unmarshal(data, &md) == nil {
			out = append(out, chartEntry{path: p, name: md.Name, version: md.Version})
		}
	}
	m.entries[dir] = out
	return out
}

// readSmall reads a Chart.yaml, refusing anything that is not a small
// regular file.
func readSmall(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return nil, os.ErrInvalid
	}
	return os.ReadFile(path)
}
