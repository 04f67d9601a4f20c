package syncer

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	pathpkg "path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/truce-dev/truce/manifest"
)

// credentials checks --git-secret and --git-insecure-http and returns
// what reads the credentials before every pass (nil without a secret).
func credentials(src manifest.GitSource, dir string, insecureHTTP bool) (func() (transport.AuthMethod, error), error) {
	if dir == "" {
		if insecureHTTP {
			return nil, errors.New("--git-insecure-http lets the credentials of --git-secret go over plain http://: it needs --git-secret")
		}
		return nil, nil
	}
	opts := manifest.GitAuthOptions{InsecureHTTP: insecureHTTP}
	read := func() (transport.AuthMethod, error) {
		auth, err := manifest.GitAuthFromDir(dir, src.URL, opts)
		if err != nil {
			return nil, fmt.Errorf("--git-secret %s: %w", dir, err)
		}
		return auth, nil
	}
	// Read once now: a bad directory is bad input, found before anything
	// is read or written.
	if _, err := read(); err != nil {
		if errors.Is(err, manifest.ErrGitInsecure) && isPlainHTTP(src.URL) {
			err = fmt.Errorf("%w (--git-insecure-http allows it)", err)
		}
		return nil, err
	}
	return read, nil
}

func isPlainHTTP(u string) bool { return strings.HasPrefix(strings.ToLower(u), "http://") }

// parseSource reads SOURCE and applies --ref and --path. A Git URL is
// parsed by manifest.ParseGitArg; a local repository may use the same
// //path and ?ref= suffixes.
func parseSource(arg, ref, path string) (manifest.GitSource, error) {
	src, remote := manifest.ParseGitArg(arg)
	if !remote && isPlainHTTP(arg) {
		// ParseGitArg leaves plain http:// out (truce check never reads
		// it); a sync reads it as Flux does, spelled like https://.
		if s, ok := manifest.ParseGitArg("https://" + arg[len("http://"):]); ok {
			s.URL = "http://" + s.URL[len("https://"):]
			src, remote = s, true
		}
	}
	if remote {
		if u, err := url.Parse(src.URL); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				// Not quoted back: the message would print the password.
				return manifest.GitSource{}, errors.New("SOURCE has a password in its URL, which would show in logs, Events and the GitSync status: " +
					"put it in --git-secret DIR (files username and password) instead")
			}
		}
	} else {
		if strings.Contains(arg, "://") || strings.HasPrefix(arg, "git@") {
			return src, fmt.Errorf("SOURCE %q is not a Git URL truce can read: want URL[//path][?ref=REF] (https://, ssh://, git@host:path, file://, http://) or a local repository", arg)
		}
		var err error
		if src, err = parseLocalSource(arg); err != nil {
			return src, err
		}
	}
	if ref != "" {
		if src.Ref != "" && src.Ref != ref {
			return src, fmt.Errorf("SOURCE names ref %q and --ref %q: give one", src.Ref, ref)
		}
		src.Ref = ref
	}
	if path != "" {
		if src.Path != "" && src.Path != path {
			return src, fmt.Errorf("SOURCE names path %q and --path %q: give one", src.Path, path)
		}
		src.Path = path
	}
	return src, nil
}

// parseLocalSource reads a local repository argument,
// PATH[//sub/path][?ref=REF]; a path that exists only as written whole
// (a "?" in a directory name) is taken whole.
func parseLocalSource(arg string) (manifest.GitSource, error) {
	src, err := splitLocalSource(arg)
	if err != nil {
		if _, serr := os.Stat(arg); serr == nil {
			return manifest.GitSource{URL: arg}, nil
		}
	}
	return src, err
}

func splitLocalSource(arg string) (manifest.GitSource, error) {
	base, query, _ := strings.Cut(arg, "?")
	src := manifest.GitSource{URL: base}
	if i := strings.Index(base, "//"); i > 0 {
		src.URL = base[:i]
		if sub := pathpkg.Clean(base[i+2:]); sub != "." {
			src.Path = sub
		}
	}
	if query != "" {
		values, err := url.ParseQuery(query)
		if err != nil || len(values) != 1 || len(values["ref"]) != 1 {
			return src, fmt.Errorf("SOURCE %q: want PATH[//sub/path][?ref=REF]", arg)
		}
		src.Ref = values["ref"][0]
	}
	if _, err := os.Stat(src.URL); err != nil {
		return src, fmt.Errorf("SOURCE %s: %w", arg, err)
	}
	return src, nil
}
