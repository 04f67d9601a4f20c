package world

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/truce-dev/truce/manifest"
)

// checkout returns a directory holding repoURL at revision (empty or
// HEAD: the default branch), cloned once per Load. Offline, or when the
// clone fails, the source is Unpredictable: what it holds is unknown. A
// revision the repository does not have is the error the tools show.
func (l *loader) checkout(ctx context.Context, repoURL, revision string) (string, error) {
	if revision == "HEAD" {
		revision = ""
	}
	key := repoURL + "@" + revision
	if dir, ok := l.checkouts[key]; ok {
		return dir, nil
	}
	subject := "repository " + repoURL
	if revision != "" {
		subject += " at " + revision
	}
	if l.opts.Render.Offline {
		return "", unpredictable(subject, "needs the network (--offline)")
	}
	auth, err := l.gitAuth(repoURL)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "truce-checkout-")
	if err != nil {
		return "", err
	}
	l.cleanup = append(l.cleanup, func() { os.RemoveAll(dir) })
	rev, err := manifest.CheckoutGit(ctx, manifest.GitSource{URL: repoURL, Ref: revision, Auth: auth}, dir, l.opts.Render.Manifest)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, manifest.ErrGitRef):
		// The repository answered: the revision is not there, and the
		// tools fail the same way.
		return "", fmt.Errorf("%s: %w", subject, err)
	default:
		return "", unpredictable(subject, "cannot be cloned: %v", err)
	}
	l.checkouts[key] = dir
	l.labels[dir] = repoURL + "@" + rev.ShortCommit()
	return dir, nil
}

// gitAuth is the credentials of Options.GitSecret for repoURL; nil
// without a secret, and for local and file:// repositories, which are
// read without credentials.
func (l *loader) gitAuth(repoURL string) (transport.AuthMethod, error) {
	if l.opts.GitSecret == "" || !takesCredentials(repoURL) {
		return nil, nil
	}
	auth, err := manifest.GitAuthFromDir(l.opts.GitSecret, repoURL, l.opts.GitAuth)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", repoURL, err)
	}
	return auth, nil
}

// takesCredentials reports whether repoURL is cloned over a transport a
// Flux Git secret has credentials for.
func takesCredentials(repoURL string) bool {
	if !strings.Contains(repoURL, "://") && !strings.Contains(repoURL, "@") {
		return false
	}
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return false
	}
	switch ep.Protocol {
	case "https", "http", "ssh":
		return true
	}
	return false
}

// label shows a path inside a checkout as URL@commit//path.
func (l *loader) label(p string) (string, bool) {
	for dir, label := range l.labels {
		if rest, ok := strings.CutPrefix(p, dir+string(os.PathSeparator)); ok {
			return label + "//" + rest, true
		}
	}
	return "", false
}
