package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ErrGitRef classifies an *Error about a ref that does not exist in a
// repository or does not lead to a commit.
var ErrGitRef = errors.New("git ref not found")

// ErrGitUnadvertised classifies the *Error of ResolveGit for a commit SHA
// that no branch or tag of a remote repository points at: servers do not
// list such commits, so only fetching would tell which one the SHA names.
var ErrGitUnadvertised = errors.New("git commit not advertised")

// GitSource names manifests in a Git repository.
type GitSource struct {
	// URL is a local path to a repository (a work tree, any directory
	// inside one, or a bare repository), or a URL to clone:
	// https://..., ssh://..., user@host:path or file://....
	URL string
	// Ref is a branch, tag, full ref name (refs/...) or commit SHA
	// (abbreviated or full). Empty means HEAD: the checked-out branch of
	// a local repository, the default branch of a remote one.
	Ref string
	// Path is a slash-separated sub-path inside the repository, a
	// directory or a file; empty means the repository root.
	Path string
	// Auth authenticates to a remote URL, in the ls-remote and the clone;
	// nil is anonymous (or the URL's own user info). GitAuthFromDir builds
	// it from a Flux Git secret. It is sent as given, also over plain
	// http://, and is no part of String.
	Auth transport.AuthMethod
}

// String formats s the way ParseGitArg reads it:
// URL[//Path][?ref=Ref].
func (s GitSource) String() string {
	out := s.URL
	if s.Path != "" {
		out += "//" + s.Path
	}
	if s.Ref != "" {
		out += "?ref=" + url.QueryEscape(s.Ref)
	}
	return out
}

// GitRevision is the commit a GitSource resolved to.
type GitRevision struct {
	// Ref is the full name of the ref that was resolved, such as
	// refs/heads/main or refs/tags/v1.2.0; empty when a commit SHA was
	// asked for or HEAD was detached.
	Ref string
	// Commit is the full hexadecimal commit hash.
	Commit string
}

// String formats r like Flux's source revisions: "main@sha1:<commit>" for
// a branch, "v1.2.0@sha1:<commit>" for a tag, the full name for other refs
// ("refs/pull/1/head@sha1:<commit>"), and "sha1:<commit>" without a ref.
func (r GitRevision) String() string {
	rev := "sha1:" + r.Commit
	name := plumbing.ReferenceName(r.Ref)
	switch {
	case r.Ref == "":
		return rev
	case name.IsBranch() || name.IsTag():
		return name.Short() + "@" + rev
	}
	return r.Ref + "@" + rev
}

// ShortCommit is the commit abbreviated to 7 characters, as in Sources.
func (r GitRevision) ShortCommit() string {
	if len(r.Commit) > 7 {
		return r.Commit[:7]
	}
	return r.Commit
}

// LoadGit loads the objects at src.Path of the commit src.Ref resolves to,
// with the same rules as LoadPaths applies to a directory (kustomizations
// rendered through kustomize, other directories walked for *.yaml, *.yml
// and *.json) or to a file. Sources read "repo@<short commit>:path:line".
//
// A local repository is read in place from its object store: nothing is
// checked out and uncommitted changes are not seen. A URL is cloned into
// memory, with depth 1 unless a commit SHA that no branch or tag points at
// is asked for; ctx bounds the clone. Symlinks in the tree are followed
// only when they stay inside it.
//
// The revision is returned whenever the ref resolved, also when loading
// then failed. Errors are *Errors (joined, as for LoadPaths); a repository
// that cannot be opened or cloned and a missing path match fs.ErrNotExist
// where that is the cause, a missing ref ErrGitRef.
func LoadGit(ctx context.Context, src GitSource, opts Options) ([]Object, *GitRevision, error) {
	l := loader{decoder: newDecoder(opts), seen: make(map[string]bool)}
	if !l.proceed(ctx) {
		objs, err := l.result()
		return objs, nil, err
	}
	c, err := OpenGit(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	rev := c.Revision()
	objs, err := c.Load(ctx, opts)
	return objs, &rev, err
}

func (l *loader) loadGitPath(ctx context.Context, t *tree, src GitSource, rev *GitRevision, p string) ([]Object, error) {
	shown := t.display(p)
	if p == "." {
		shown = strings.TrimSuffix(shown, ".")
	}
	if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
		l.fail(newError(Source{File: shown}, ErrOutsideRoot, fmt.Sprintf(
			"refusing to read: path %q leads outside the repository", src.Path)))
		return l.result()
	}
	real, err := resolveIn(t.fsys, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			l.fail(newError(Source{File: shown}, err, fmt.Sprintf(
				"path %q does not exist in %s at %s", src.Path, src.URL, rev)))
		} else {
			l.fail(treeError(shown, err))
		}
		return l.result()
	}
	info, err := fs.Stat(t.fsys, real)
	if err != nil {
		l.fail(treeError(shown, err))
		return l.result()
	}
	switch {
	case info.IsDir():
		l.walkTree(ctx, t, real)
	case isKustomizationName(path.Base(real)):
		l.renderKustomization(t, path.Dir(real), real)
	case info.Mode().IsRegular():
		l.loadTreeFile(t, t.display(p), real, info)
	default:
		l.fail(newError(Source{File: shown}, fs.ErrInvalid, "not a regular file or directory"))
	}
	return l.result()
}

// isRemoteURL reports whether a GitSource.URL is to be cloned rather than
// opened on disk.
func isRemoteURL(u string) bool {
	return strings.Contains(u, "://") || scpLike.MatchString(u)
}

// scpLike matches scp-style Git addresses: user@host:path.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]*@[A-Za-z0-9][A-Za-z0-9.-]*:(?:[^/]|/[^/])`)

// openRepository opens a local repository in place or clones a remote one
// into memory. It returns the repository, the name used in Sources and,
// for a local path below the top of a work tree, that path relative to it.
func openRepository(ctx context.Context, src GitSource) (*git.Repository, string, string, error) {
	if src.URL == "" {
		return nil, "", "", newError(Source{File: "<git>"}, fs.ErrInvalid, "no repository given")
	}
	if isRemoteURL(src.URL) {
		repo, err := cloneRepository(ctx, src)
		return repo, repoName(src.URL), ".", err
	}
	repo, err := git.PlainOpenWithOptions(src.URL, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		cause := err
		if errors.Is(err, git.ErrRepositoryNotExists) {
			cause = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		}
		return nil, "", "", newError(Source{File: src.URL}, cause, "cannot open Git repository: "+err.Error())
	}
	name, prefix := repoName(src.URL), "."
	if wt, err := repo.Worktree(); err == nil {
		top := wt.Filesystem.Root()
		name = filepath.Base(top)
		// A directory inside the work tree selects that part of it.
		if abs, err := filepath.Abs(src.URL); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
			if realTop, err := filepath.EvalSymlinks(top); err == nil {
				top = realTop
			}
			if rel, err := filepath.Rel(top, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				prefix = filepath.ToSlash(rel)
			}
		}
	}
	return repo, name, prefix, nil
}

// repoName is the last element of a repository address without ".git".
func repoName(u string) string {
	u = strings.TrimRight(u, "/")
	if i := strings.LastIndexAny(u, "/:"); i >= 0 {
		u = u[i+1:]
	}
	u = strings.TrimSuffix(u, ".git")
	if u == "" {
		return "repo"
	}
	return u
}

var hexRE = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// cloneRepository clones src.URL into memory. A branch or tag is fetched
// alone with depth 1; so is a commit that an advertised ref points at.
// Any other commit needs the full history, since servers need not serve
// unadvertised commits to shallow fetches.
func cloneRepository(ctx context.Context, src GitSource) (*git.Repository, error) {
	opts := &git.CloneOptions{URL: src.URL, Auth: src.Auth, Depth: 1, SingleBranch: true, NoCheckout: true, Tags: git.NoTags}
	if src.Ref != "" {
		refs, err := listRemote(ctx, src)
		if err != nil {
			return nil, err
		}
		name, _, err := refs.find(src)
		switch {
		case err == nil:
			opts.ReferenceName = name
		case errors.Is(err, ErrGitUnadvertised):
			opts = &git.CloneOptions{URL: src.URL, Auth: src.Auth, NoCheckout: true, Tags: git.AllTags}
		default:
			return nil, err
		}
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, opts)
	if err != nil {
		return nil, remoteError(ctx, src, "cannot clone Git repository", err)
	}
	return repo, nil
}

// remoteError is the *Error of a failed ls-remote or clone: stopped by
// ctx, or refused, with a hint about credentials.
func remoteError(ctx context.Context, src GitSource, doing string, err error) error {
	if ctx.Err() != nil {
		return newError(Source{File: src.URL}, fmt.Errorf("%w: %w", ctx.Err(), err), doing+": stopped: "+ctx.Err().Error())
	}
	// Servers' 401 bodies, which go-git quotes, end in newlines.
	msg := doing + ": " + strings.TrimSpace(err.Error())
	switch {
	case src.Auth == nil && (errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)):
		msg += " (no credentials were given)"
	case src.Auth != nil && errors.Is(err, transport.ErrAuthenticationRequired):
		msg += " (the credentials were refused)"
	case src.Auth != nil && errors.Is(err, transport.ErrAuthorizationFailed):
		msg += " (the credentials do not grant read access)"
	}
	return newError(Source{File: src.URL}, err, msg)
}

// listRemote asks a remote repository for its refs (git ls-remote),
// annotated tags peeled.
func listRemote(ctx context.Context, src GitSource) (remoteRefs, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{src.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: src.Auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return remoteRefs{}, remoteError(ctx, src, "cannot list the refs of Git repository", err)
	}
	out := remoteRefs{
		byName: make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs)),
		peeled: make(map[plumbing.ReferenceName]plumbing.Hash),
	}
	for _, r := range refs {
		if name, ok := strings.CutSuffix(r.Name().String(), "^{}"); ok {
			out.peeled[plumbing.ReferenceName(name)] = r.Hash()
		} else {
			out.byName[r.Name()] = r
		}
	}
	return out, nil
}

// remoteRefs is what a remote repository advertises.
type remoteRefs struct {
	byName map[plumbing.ReferenceName]*plumbing.Reference
	// peeled holds the commit each annotated tag tags.
	peeled map[plumbing.ReferenceName]plumbing.Hash
}

// commit is the commit (or, for a ref to something else, the object) the
// ref name leads to.
func (r remoteRefs) commit(name plumbing.ReferenceName) (plumbing.Hash, bool) {
	for range 10 {
		ref, ok := r.byName[name]
		switch {
		case !ok:
			return plumbing.ZeroHash, false
		case ref.Type() == plumbing.SymbolicReference:
			name = ref.Target()
			continue
		}
		if h, ok := r.peeled[name]; ok {
			return h, true
		}
		return ref.Hash(), true
	}
	return plumbing.ZeroHash, false
}

// pick finds the advertised ref that ref names: a branch, a tag, a full
// ref name, or a full commit hash some branch or tag leads to (byCommit).
func (r remoteRefs) pick(ref string) (name plumbing.ReferenceName, byCommit, ok bool) {
	for _, n := range []plumbing.ReferenceName{
		plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref), plumbing.ReferenceName(ref),
	} {
		if rr, ok := r.byName[n]; ok && n != plumbing.HEAD && (rr.Type() == plumbing.HashReference || rr.Type() == plumbing.SymbolicReference) {
			return n, false, true
		}
	}
	if len(ref) == 40 || len(ref) == 64 {
		want := strings.ToLower(ref)
		// Sorted, so that the same listing always gives the same answer.
		names := make([]plumbing.ReferenceName, 0, len(r.byName))
		for n := range r.byName {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if !n.IsBranch() && !n.IsTag() {
				continue
			}
			// An annotated tag matches by its commit and by itself.
			if h, ok := r.commit(n); ok && (h.String() == want || r.byName[n].Hash().String() == want) {
				return n, true, true
			}
		}
	}
	return "", false, false
}

// find is pick for src.Ref, with the errors: a SHA no branch or tag leads
// to matches ErrGitUnadvertised (only a clone of the history can tell),
// anything else not found ErrGitRef.
func (r remoteRefs) find(src GitSource) (name plumbing.ReferenceName, byCommit bool, err error) {
	name, byCommit, ok := r.pick(src.Ref)
	switch {
	case ok:
		return name, byCommit, nil
	case hexRE.MatchString(src.Ref):
		return "", false, newError(Source{File: src.URL}, ErrGitUnadvertised, fmt.Sprintf(
			"ref %q is no branch or tag, and no branch or tag leads to a commit of that SHA: only a clone can resolve it", src.Ref))
	}
	return "", false, newError(Source{File: src.URL}, ErrGitRef, fmt.Sprintf(
		"ref %q not found: the repository has no such branch or tag", src.Ref))
}

// ResolveGit finds the commit src names without loading anything: a
// local repository's refs are read in place, a remote one is asked with
// one ls-remote (with src.Auth) and nothing is fetched. The revision is
// the one LoadGit would return for src at that moment, so that a caller
// holding what LoadGit returned for that revision (with the same Path and
// Options) can skip loading it again: kustomizations may not refer to
// anything outside the repository, so nothing else changes the objects.
//
// A remote commit SHA that no branch or tag leads to cannot be resolved
// without fetching: the error then matches ErrGitUnadvertised. Other
// errors are as LoadGit's: a missing ref matches ErrGitRef.
func ResolveGit(ctx context.Context, src GitSource) (*GitRevision, error) {
	if err := ctx.Err(); err != nil {
		return nil, newError(Source{File: src.URL}, err, "resolving stopped: "+err.Error())
	}
	if src.URL == "" || !isRemoteURL(src.URL) {
		repo, _, _, err := openRepository(ctx, src)
		if err != nil {
			return nil, err
		}
		_, rev, err := resolveRef(repo, src)
		return rev, err
	}
	refs, err := listRemote(ctx, src)
	if err != nil {
		return nil, err
	}
	var name plumbing.ReferenceName
	if src.Ref == "" {
		head, ok := refs.byName[plumbing.HEAD]
		if !ok {
			return nil, newError(Source{File: src.URL}, ErrGitRef, "cannot resolve HEAD: the repository advertises none")
		}
		name = plumbing.HEAD
		if head.Type() == plumbing.SymbolicReference {
			name = head.Target()
		}
	} else {
		n, byCommit, err := refs.find(src)
		if err != nil {
			return nil, err
		}
		if byCommit {
			// LoadGit names no ref when a commit was asked for.
			h, _ := refs.commit(n)
			return &GitRevision{Commit: h.String()}, nil
		}
		name = n
	}
	h, ok := refs.commit(name)
	if !ok {
		return nil, newError(Source{File: src.URL}, ErrGitRef, fmt.Sprintf("ref %q not found: %s leads nowhere", src.Ref, name))
	}
	rev := &GitRevision{Ref: name.String(), Commit: h.String()}
	if name == plumbing.HEAD {
		rev.Ref = ""
	}
	return rev, nil
}

// resolveRef finds the commit src.Ref names in repo. Branches win over
// tags, and both over a commit hash of the same spelling, as in git.
func resolveRef(repo *git.Repository, src GitSource) (*object.Commit, *GitRevision, error) {
	notFound := func(why string) error {
		return newError(Source{File: src.URL}, ErrGitRef, fmt.Sprintf("ref %q not found: %s", src.Ref, why))
	}
	var (
		name plumbing.ReferenceName
		hash plumbing.Hash
	)
	if src.Ref == "" {
		head, err := repo.Head()
		if err != nil {
			return nil, nil, newError(Source{File: src.URL}, ErrGitRef, "cannot resolve HEAD: "+err.Error())
		}
		hash = head.Hash()
		if head.Name() != plumbing.HEAD {
			name = head.Name()
		}
	} else {
		candidates := []plumbing.ReferenceName{
			plumbing.NewBranchReferenceName(src.Ref),
			plumbing.NewTagReferenceName(src.Ref),
			plumbing.ReferenceName("refs/remotes/" + src.Ref),
		}
		if strings.HasPrefix(src.Ref, "refs/") {
			candidates = []plumbing.ReferenceName{plumbing.ReferenceName(src.Ref)}
		}
		for _, n := range candidates {
			if r, err := repo.Reference(n, true); err == nil {
				name, hash = n, r.Hash()
				break
			}
		}
		if name == "" {
			h, err := repo.ResolveRevision(plumbing.Revision(src.Ref))
			if err != nil {
				return nil, nil, notFound("it is neither a branch, a tag nor a commit of the repository")
			}
			hash = *h
		}
	}
	commit, err := peelToCommit(repo, hash)
	if err != nil {
		return nil, nil, notFound(err.Error())
	}
	return commit, &GitRevision{Ref: string(name), Commit: commit.Hash.String()}, nil
}

// peelToCommit follows annotated tags to the commit they tag.
func peelToCommit(repo *git.Repository, h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		if c, err := repo.CommitObject(h); err == nil {
			return c, nil
		}
		tag, err := repo.TagObject(h)
		if err != nil {
			return nil, fmt.Errorf("object %s is not a commit", h)
		}
		if tag.TargetType != plumbing.CommitObject && tag.TargetType != plumbing.TagObject {
			return nil, fmt.Errorf("tag %s points to a %s, not a commit", tag.Name, tag.TargetType)
		}
		h = tag.Target
	}
	return nil, fmt.Errorf("too many nested tags at %s", h)
}

// ParseGitArg recognises a command-line argument that names a Git
// repository rather than a local path: https://..., ssh://...,
// user@host:path (scp style, as in git@github.com:org/repo) and file://...,
// each optionally followed by //sub/path and ?ref=branch-tag-or-sha, as
// kustomize and Argo CD spell them:
//
//	https://github.com/org/repo//deploy/app?ref=v1.2.0
//	git@github.com:org/repo.git//deploy?ref=main
//
// A sub-path may also follow a ".git/" in the address
// (https://host/org/repo.git/deploy). ?version= is accepted for ?ref= and
// kustomize's ?timeout= and ?submodules= are ignored. Anything else,
// including a local directory that happens to be a Git work tree, is not a
// Git argument; so is a malformed one (no host, an unknown query parameter,
// a sub-path leaving the repository), which reports false.
func ParseGitArg(arg string) (GitSource, bool) {
	if arg == "" || !utf8.ValidString(arg) || strings.IndexFunc(arg, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return GitSource{}, false
	}
	base, query, _ := strings.Cut(arg, "?")
	var hostEnd int // index in base after which "//" may start a sub-path
	lower := strings.ToLower(base)
	switch {
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "ssh://"):
		u, err := url.Parse(base)
		if err != nil || u.Host == "" || u.Opaque != "" {
			return GitSource{}, false
		}
		hostEnd = len(u.Scheme) + len("://")
	case strings.HasPrefix(lower, "file://"):
		rest := base[len("file://"):]
		if !strings.HasPrefix(rest, "/") || rest == "/" {
			return GitSource{}, false
		}
		hostEnd = len("file://") + 1
	case scpLike.MatchString(base):
		hostEnd = strings.Index(base, ":") + 1
	default:
		return GitSource{}, false
	}
	var src GitSource
	repo, sub := base, ""
	if i := strings.Index(base[hostEnd:], "//"); i >= 0 {
		repo, sub = base[:hostEnd+i], base[hostEnd+i+2:]
	} else if i := strings.Index(base[hostEnd:], ".git/"); i >= 0 {
		repo, sub = base[:hostEnd+i+len(".git")], base[hostEnd+i+len(".git/"):]
	}
	if len(repo) <= hostEnd || strings.HasSuffix(repo, ":") {
		return GitSource{}, false
	}
	src.URL = repo
	if sub != "" {
		sub = path.Clean(sub)
		if path.IsAbs(sub) || sub == ".." || strings.HasPrefix(sub, "../") {
			return GitSource{}, false
		}
		if sub != "." {
			src.Path = sub
		}
	}
	if query != "" {
		values, err := url.ParseQuery(query)
		if err != nil {
			return GitSource{}, false
		}
		for key, vals := range values {
			switch key {
			case "ref", "version":
				if len(vals) != 1 || (src.Ref != "" && src.Ref != vals[0]) {
					return GitSource{}, false
				}
				src.Ref = vals[0]
			case "timeout", "submodules":
			default:
				return GitSource{}, false
			}
		}
		if strings.IndexFunc(src.Ref, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return GitSource{}, false
		}
	}
	return src, true
}
