package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/world"
)

// renderFlags say how a repository's sources are rendered: which URLs
// name it, where charts are cached, whether the network may be used.
type renderFlags struct {
	repoURLs []string
	repoRoot string
	cacheDir string
	offline  bool
}

func (r *renderFlags) register(f *pflag.FlagSet) {
	f.StringSliceVar(&r.repoURLs, "repo-url", nil, "URLs that name the repository being checked besides its Git remotes: Applications, GitRepositories and value files with these URLs are read from the working tree")
	f.StringVar(&r.repoRoot, "repo-root", "", "the repository's root directory, which Application and Kustomization paths are relative to (default: the top of the Git work tree)")
	f.StringVar(&r.cacheDir, "cache-dir", "", "where pulled Helm charts are kept (default: truce under the user's cache directory)")
	f.BoolVar(&r.offline, "offline", false, "use no network: charts not in the cache make their Application or HelmRelease Unpredictable")
}

func (r *renderFlags) options(lopts manifest.Options) world.Options {
	return world.Options{
		Render:   render.Options{Manifest: lopts, CacheDir: r.cacheDir, Offline: r.offline},
		RepoURLs: r.repoURLs,
		Root:     r.repoRoot,
	}
}

// loadCheckRequests reads the repository through its entry points (one
// request per world: each Flux cluster directory, and the other paths
// together) and the cluster; Git arguments are read as one repository.
func loadCheckRequests(ctx context.Context, cmd *cobra.Command, cf *clusterFlags, rf *renderFlags, args []string, ref, kubeconfig, kubeContext string) ([]check.Request, error) {
	for _, a := range args {
		if _, ok := manifest.ParseGitArg(a); ok || a == "-" {
			req, err := loadCheckRequest(ctx, cmd, cf, args, ref, kubeconfig, kubeContext)
			return []check.Request{req}, err
		}
	}
	_, aopts, clusterObjs, err := cf.load(ctx)
	if err != nil {
		return nil, err
	}
	wopts := rf.options(manifest.DefaultOptions())
	worlds, err := world.Load(ctx, args, wopts)
	if err != nil {
		return nil, err
	}
	live := kubeconfig != "" || kubeContext != ""
	var out []check.Request
	for i, w := range worlds {
		if len(w.Objects) == 0 && len(w.Units) == 0 {
			return nil, fmt.Errorf("no manifests found in %s", strings.Join(args, ", "))
		}
		cl := clusterObjs
		if live {
			if cl, err = readLiveCluster(ctx, kubeconfig, kubeContext, w.Objects); err != nil {
				return nil, err
			}
		}
		src := check.Sources{Repository: args, Cluster: cf.cluster, Live: live}
		req := check.Request{
			Input:   check.WorldInput(w, cl),
			Sources: src,
			Options: check.Options{Admission: aopts},
		}
		if w.Followed() {
			req.Load = check.WorldLoader(args, i, wopts, src, cl)
		}
		out = append(out, req)
	}
	return out, nil
}

// readWorlds reads local paths through their entry points (render/world);
// ok is false for standard input and Git arguments, which are read as
// plain files.
func readWorlds(ctx context.Context, rf *renderFlags, paths []string) (worlds []*world.World, ok bool, err error) {
	for _, a := range paths {
		if _, git := manifest.ParseGitArg(a); git || a == "-" {
			return nil, false, nil
		}
	}
	worlds, err = world.Load(ctx, paths, rf.options(manifest.DefaultOptions()))
	return worlds, true, err
}
