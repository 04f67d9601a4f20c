package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/world"
)

// renderFlags say how a repository's sources are rendered: which URLs
// name it, where charts are cached, whether the network may be used.
type renderFlags struct {
	repoURLs []string
	repoRoot string
	cacheDir string
	offline  bool
	// gitSecret and gitInsecureHTTP are as truce sync's flags, for the
	// repositories Applications and GitRepositories clone.
	gitSecret       string
	gitInsecureHTTP bool
	// bucketSecret holds the credentials of Flux Buckets whose Secret is
	// not in the repository.
	bucketSecret string
	// registryConfig holds OCI registry credentials, as Helm's flag.
	registryConfig string
	// repositoryConfig holds HTTP chart repository credentials, as Helm's
	// flag.
	repositoryConfig string
	// limits bound reading the repository; the command's --max-* flags.
	limits *limitFlags
}

func (r *renderFlags) register(f *pflag.FlagSet) {
	f.StringSliceVar(&r.repoURLs, "repo-url", nil, "URLs that name the repository being checked besides its Git remotes: Applications, GitRepositories and value files with these URLs are read from the working tree")
	f.StringVar(&r.repoRoot, "repo-root", "", "the repository's root directory, which Application and Kustomization paths are relative to (default: the top of the Git work tree)")
	f.StringVar(&r.cacheDir, "cache-dir", "", "where pulled Helm charts are kept (default: truce under the user's cache directory)")
	f.BoolVar(&r.offline, "offline", false, "use no network: charts not in the cache make their Application or HelmRelease Unpredictable")
	f.StringVar(&r.gitSecret, "git-secret", "", "a directory holding the credentials for the Git repositories Applications and GitRepositories clone, as a mounted Flux Git secret: username and password, or bearerToken (https://); identity, known_hosts and password, the key's passphrase (SSH)")
	f.BoolVar(&r.gitInsecureHTTP, "git-insecure-http", false, "send --git-secret's credentials to plain http:// repositories, in clear text")
	f.StringVar(&r.registryConfig, "registry-config", "", "the OCI registry credentials file for Helm OCI charts and Flux OCIRepositories, as helm registry login writes it (default: Helm's registry config, then Docker's config.json)")
	f.StringVar(&r.repositoryConfig, "repository-config", "", "a Helm repositories file (repositories.yaml, as helm repo add writes it) whose entries give HTTP chart repositories their credentials and TLS settings, by URL (default: none, anonymous)")
	f.StringVar(&r.bucketSecret, "bucket-secret", "", "a directory holding the credentials of Flux Buckets whose spec.secretRef Secret is not in the repository as plain data, as a mounted Secret: files accesskey and secretkey")
}

// options are the world.Options the flags say; errors are about the
// flags.
func (r *renderFlags) options() (world.Options, error) {
	if err := r.validateGit(); err != nil {
		return world.Options{}, err
	}
	lopts, err := r.limits.options()
	if err != nil {
		return world.Options{}, err
	}
	return world.Options{
		Render:           render.Options{Manifest: lopts, CacheDir: r.cacheDir, Offline: r.offline},
		RepoURLs:         r.repoURLs,
		Root:             r.repoRoot,
		GitSecret:        r.gitSecret,
		GitAuth:          manifest.GitAuthOptions{InsecureHTTP: r.gitInsecureHTTP},
		BucketSecret:     r.bucketSecret,
		RegistryConfig:   r.registryConfig,
		RepositoryConfig: r.repositoryConfig,
	}, nil
}

// validateGit checks --git-secret, --git-insecure-http, --bucket-secret
// and --registry-config.
func (r *renderFlags) validateGit() error {
	if r.gitInsecureHTTP && r.gitSecret == "" {
		return errors.New("--git-insecure-http lets the credentials of --git-secret go over plain http://: it needs --git-secret")
	}
	if r.registryConfig != "" {
		if info, err := os.Stat(r.registryConfig); err != nil {
			return fmt.Errorf("--registry-config %s: reading the registry credentials: %w", r.registryConfig, err)
		} else if info.IsDir() {
			return fmt.Errorf("--registry-config %s: reading the registry credentials: %s is a directory", r.registryConfig, r.registryConfig)
		}
	}
	if r.repositoryConfig != "" {
		if err := helm.CheckRepositoryConfig(r.repositoryConfig); err != nil {
			return fmt.Errorf("--repository-config %s: reading the chart repository credentials: %w", r.repositoryConfig, err)
		}
	}
	if r.bucketSecret != "" {
		if info, err := os.Stat(r.bucketSecret); err != nil {
			return fmt.Errorf("--bucket-secret %s: reading the bucket credentials: %w", r.bucketSecret, err)
		} else if !info.IsDir() {
			return fmt.Errorf("--bucket-secret %s: reading the bucket credentials: %s is not a directory", r.bucketSecret, r.bucketSecret)
		}
	}
	if r.gitSecret != "" {
		if info, err := os.Stat(r.gitSecret); err != nil {
			return fmt.Errorf("--git-secret %s: reading the Git credentials: %w", r.gitSecret, err)
		} else if !info.IsDir() {
			return fmt.Errorf("--git-secret %s: reading the Git credentials: %s is not a directory", r.gitSecret, r.gitSecret)
		}
	}
	return nil
}

// gitAuth is the credentials of --git-secret for a Git argument's URL;
// nil without --git-secret and for file:// URLs.
func (r *renderFlags) gitAuth(url string) (transport.AuthMethod, error) {
	if r.gitSecret == "" || strings.HasPrefix(url, "file://") {
		return nil, nil
	}
	auth, err := manifest.GitAuthFromDir(r.gitSecret, url, manifest.GitAuthOptions{InsecureHTTP: r.gitInsecureHTTP})
	if errors.Is(err, manifest.ErrGitInsecure) {
		err = fmt.Errorf("%w (--git-insecure-http allows it)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--git-secret %s: %w", r.gitSecret, err)
	}
	return auth, nil
}

// loadCheckRequests reads the repository through its entry points (one
// request per world: each Flux cluster directory, and the other paths
// together) and the cluster; Git arguments are read as one repository.
// Fixes are verified in ws's copies of the repository.
func loadCheckRequests(ctx context.Context, cmd *cobra.Command, ws *check.Workspace, cf *clusterFlags, rf *renderFlags, args []string, ref, kubeconfig, kubeContext string) ([]check.Request, error) {
	for _, a := range args {
		if _, ok := manifest.ParseGitArg(a); ok || a == "-" {
			req, err := loadCheckRequest(ctx, cmd, cf, rf, args, ref, kubeconfig, kubeContext)
			return []check.Request{req}, err
		}
	}
	_, aopts, clusterObjs, err := cf.load(ctx)
	if err != nil {
		return nil, err
	}
	wopts, err := rf.options()
	if err != nil {
		return nil, err
	}
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
		if req.Options.Admission.Engines, err = policyEngines(req.Input.Cluster, req.Input.Repository); err != nil {
			return nil, err
		}
		if w.Followed() {
			req.Load = check.WorldLoader(ws, args, i, wopts, src, cl)
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
	wopts, err := rf.options()
	if err != nil {
		return nil, true, err
	}
	worlds, err = world.Load(ctx, paths, wopts)
	return worlds, true, err
}
