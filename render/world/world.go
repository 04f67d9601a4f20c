// Package world reads a repository the way Argo CD and Flux read it:
// from its entry points (a Flux cluster directory, an Argo CD
// Application or app of apps, a directory given on the command line),
// following every Application, Kustomization and HelmRelease whose source
// is this repository or a chart, and rendering each with render's
// packages. Each entry point is one World: what one cluster is told to
// hold, simulated together.
package world

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

// Options direct reading a repository through its entry points.
type Options struct {
	Render render.Options
	// RepoURLs name the repository being checked besides the remotes of
	// its checkout (truce's --repo-url): sources with one of these URLs
	// are read from the working tree.
	RepoURLs []string
	// Root is the repository root; empty: the top of the Git work tree
	// holding the first path (manifest.RepositoryRoot).
	Root string
	// GitSecret is a directory laid out as a mounted Flux Git secret
	// (manifest.GitAuthFromDir): the credentials for every https://,
	// http:// and SSH repository cloned (Argo CD Application sources,
	// Flux GitRepositories). Empty clones anonymously.
	GitSecret string
	// GitAuth loosens where GitSecret's credentials may be sent.
	GitAuth manifest.GitAuthOptions
	// BucketSecret is a directory laid out as a mounted Secret of a Flux
	// Bucket (files accesskey and secretkey): the credentials of Buckets
	// whose spec.secretRef Secret is not in the repository as plain data.
	// Empty fetches them anonymously.
	BucketSecret string
	// RegistryConfig is the OCI registry credentials file for Helm OCI
	// charts and Flux OCIRepositories (Helm's --registry-config); empty
	// is Helm's, as `helm registry login` writes it. Docker's
	// config.json is read after it, as Helm does.
	RegistryConfig string
	// RepositoryConfig is a Helm repositories file (repositories.yaml,
	// Helm's --repository-config) giving HTTP chart repositories their
	// credentials by URL; empty reads them anonymously.
	RepositoryConfig string
}

// Unit kinds.
const (
	KindApplication   = "Application"
	KindKustomization = "Kustomization"
	KindHelmRelease   = "HelmRelease"
	// KindApplicationSet is expanded into the Applications its
	// generators make (render/appset), each a unit of its own.
	KindApplicationSet = "ApplicationSet"
)

// Unit is one Application, Kustomization or HelmRelease that was
// followed, and what became of rendering it.
type Unit struct {
	manifest.Unit
	// Tool is "argocd" or "flux".
	Tool string
	// Source is where the unit is defined.
	Source manifest.Source
	// Parent is the unit whose output defines this one; zero for one
	// found in the entry point's own files.
	Parent manifest.Unit
	// DependsOn are Flux dependsOn units.
	DependsOn []manifest.Unit
	// Wave is an Application's sync wave in the app of apps that renders
	// it.
	Wave int
	// Cluster is where the unit's objects go: "" for the cluster the entry
	// point syncs, else an Argo CD destination other than its own cluster
	// or a Flux kubeConfig. Units of different clusters do not share one.
	Cluster string
	// Objects counts the objects the unit applies.
	Objects int
	// Hooks counts Argo CD hooks left out: they run in sync phases and
	// are not compared.
	Hooks int
	// DefaultNamespace is where the unit puts namespaced objects that name none:
	// an Application's destination namespace, a HelmRelease's release
	// namespace; empty leaves them to the API server ("default").
	DefaultNamespace string
	// Values is where the unit's Helm values are written, for a unit
	// that renders a chart; nil otherwise.
	Values *ValuesTarget
	// Problem is why the unit could not be rendered: a
	// *render.Unpredictable when truce cannot know (the network, a
	// generator it does not run), else the error the tool itself would
	// show. The unit applies nothing then.
	Problem error
}

// ValuesTarget is where a unit's Helm values can be changed: the field of
// the Application or HelmRelease that takes precedence over the chart's
// own values and the unit's value files.
type ValuesTarget struct {
	// Source is the Application or HelmRelease.
	Source manifest.Source
	// Pointer is the JSON pointer of its values map:
	// /spec/source/helm/valuesObject or /spec/values.
	Pointer string
	// Values are the values the templates saw: the unit's over the
	// chart's own.
	Values map[string]any
	// Reason says why the values cannot be written there, when they
	// cannot (the unit is itself rendered from a template, or its inline
	// values are a YAML string).
	Reason string
	// Files are the values files under the inline values, in Helm's
	// merge order (later files win): the chart's own values.yaml when the
	// chart is a directory of a repository, then the unit's value files
	// (Argo CD helm.valueFiles). A chart pulled from a chart repository is
	// not listed: it is not the user's to edit, and it loses to all else.
	Files []ValuesFile
	// Parameters is the JSON pointer of an Application's
	// helm.parameters, which win over its inline values; empty for a
	// HelmRelease.
	Parameters string
	// PostRenderers is the JSON pointer of a HelmRelease's
	// spec.postRenderers; empty for an Application.
	PostRenderers string
	// Probe renders the chart as the unit does with values in place of
	// the merged ones (post-renderers included), bound by the context
	// the world was loaded with; nil when it cannot.
	Probe func(values map[string]any) ([]manifest.Object, error)
}

// ValuesFile is one values file a unit's chart is rendered with.
type ValuesFile struct {
	// Path is the file.
	Path string
	// NotOwned says why the file is not the user's to edit (it belongs
	// to another repository, cloned to read it); empty for a file of the
	// repository being checked.
	NotOwned string
}

// World is what one entry point tells one cluster to hold.
type World struct {
	// Name is the entry point: a directory relative to the repository
	// root, or the paths given. Empty for a repository read without
	// following anything (plain manifests, hand-made settings), where
	// reports stay as they were.
	Name string
	// Objects are the entry point's own files and everything the units
	// render, each with Source.Unit naming the unit that applies it
	// (zero for the entry point's own files).
	Objects []manifest.Object
	// Units are the units followed, in the tools' order (Flux dependsOn,
	// then the order they were found).
	Units []*Unit
	// Base are objects the cluster holds before any unit applies:
	// namespaces Argo CD creates (CreateNamespace=true).
	Base []manifest.Object
	// Notes say what truce assumed, e.g. a bootstrap it synthesized.
	Notes []string
}

// Followed reports whether the world was read through its units.
func (w *World) Followed() bool { return len(w.Units) > 0 }

// Load reads paths through their entry points. Each directory holding
// Flux's bootstrap layout (a flux-system directory beside the cluster's
// Kustomizations) is a world of its own; the other paths together are
// one world, whose Applications, Kustomizations and HelmReleases are
// followed where their source is this repository or a chart. A repository
// where nothing can be followed is returned as one unnamed world holding
// the files as they are.
func Load(ctx context.Context, paths []string, opts Options) ([]*World, error) {
	if len(paths) == 0 {
		return nil, errors.New("no paths to read")
	}
	l, err := newLoader(paths, opts)
	if err != nil {
		return nil, err
	}
	defer l.close()
	var worlds []*World
	var rest []string
	for _, p := range paths {
		entries, err := fluxEntries(p)
		if err != nil {
			return nil, err
		}
		if len(entries) == 0 {
			rest = append(rest, p)
			continue
		}
		for _, e := range entries {
			w, err := l.fluxWorld(ctx, e)
			if err != nil {
				return nil, err
			}
			worlds = append(worlds, w)
		}
	}
	if len(rest) > 0 {
		w, err := l.plainWorld(ctx, rest)
		if err != nil {
			return nil, err
		}
		worlds = append(worlds, w)
	}
	return worlds, nil
}

// loader holds what every world of one Load shares.
type loader struct {
	opts  Options
	root  string
	repos repoSet
	// cleanup removes temporary directories (artifacts) when Load ends.
	cleanup []func()
	// wd is the working directory positions are shown relative to.
	wd string
	// checkouts are the other repositories cloned, by URL@revision;
	// labels name their directories in positions.
	checkouts, labels map[string]string
}

func newLoader(paths []string, opts Options) (*loader, error) {
	opts.Render = opts.Render.WithDefaults()
	root := opts.Root
	if root == "" {
		first := paths[0]
		if first == "-" {
			first = "."
		}
		r, err := manifest.RepositoryRoot(first)
		if err != nil {
			return nil, fmt.Errorf("finding the repository of %s: %w", first, err)
		}
		root = r
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	// Every renderer confines itself to the repository being read.
	opts.Render.Manifest.RepositoryRoot = root
	urls := append(CheckoutURLs(root), opts.RepoURLs...)
	wd, _ := os.Getwd()
	return &loader{opts: opts, root: root, repos: newRepoSet(urls...), wd: wd,
		checkouts: map[string]string{}, labels: map[string]string{}}, nil
}

func (l *loader) close() {
	for i := len(l.cleanup) - 1; i >= 0; i-- {
		l.cleanup[i]()
	}
}

// rel is p relative to the repository root, for names.
func (l *loader) rel(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	r, err := filepath.Rel(l.root, abs)
	if err != nil || r == ".." || len(r) > 2 && r[:3] == ".."+string(filepath.Separator) {
		return p
	}
	return filepath.ToSlash(r)
}

// order sorts units so that each comes after those it dependsOn (Flux
// waits for them) and an app of apps' Applications wave by wave, keeping
// the found order otherwise; a cycle keeps the found order for the units
// in it.
func order(units []*Unit) []*Unit {
	byWave(units)
	index := map[manifest.Unit]int{}
	for i, u := range units {
		index[u.Unit] = i
	}
	done := make([]bool, len(units))
	visiting := make([]bool, len(units))
	var out []*Unit
	var visit func(i int)
	visit = func(i int) {
		if done[i] || visiting[i] {
			return
		}
		visiting[i] = true
		deps := append([]manifest.Unit(nil), units[i].DependsOn...)
		sort.SliceStable(deps, func(a, b int) bool { return index[deps[a]] < index[deps[b]] })
		for _, d := range deps {
			if j, ok := index[d]; ok {
				visit(j)
			}
		}
		visiting[i] = false
		done[i] = true
		out = append(out, units[i])
	}
	for i := range units {
		visit(i)
	}
	return out
}
