package world

import (
	"context"
	"os"
	"strings"

	"github.com/truce-dev/truce/manifest"
)

// checkout returns a directory holding repoURL at revision (empty or
// HEAD: the default branch), cloned once per Load. Offline, or when the
// clone fails, the source is Unpredictable: what it holds is unknown.
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
	dir, err := os.MkdirTemp("", "truce-checkout-")
	if err != nil {
		return "", err
	}
	l.cleanup = append(l.cleanup, func() { os.RemoveAll(dir) })
	rev, err := manifest.CheckoutGit(ctx, manifest.GitSource{URL: repoURL, Ref: revision}, dir, l.opts.Render.Manifest)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", unpredictable(subject, "cannot be cloned: %v", err)
	}
	l.checkouts[key] = dir
	l.labels[dir] = repoURL + "@" + rev.ShortCommit()
	return dir, nil
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
