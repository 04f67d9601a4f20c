package world

import (
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5"
)

// NormalizeRepoURL reduces a Git URL to host/path, so that the spellings
// of one repository compare equal: https://github.com/org/repo.git,
// git@github.com:org/repo, ssh://git@github.com/org/repo/ all become
// github.com/org/repo. The host is lower-cased; the path keeps its case.
func NormalizeRepoURL(raw string) string {
	s := strings.TrimSpace(raw)
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "://") {
		// scp-like: user@host:path
		if at := strings.Index(s, "@"); at >= 0 {
			if colon := strings.Index(s[at:], ":"); colon > 0 {
				s = "ssh://" + s[:at+colon] + "/" + strings.TrimPrefix(s[at+colon+1:], "/")
			}
		}
	}
	host, path := s, ""
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if i := strings.Index(s, "/"); i >= 0 {
		host, path = s[:i], s[i:]
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	return strings.ToLower(host) + "/" + path
}

// CheckoutURLs returns the URLs of the remotes of the Git work tree at
// root; none when root is not one.
func CheckoutURLs(root string) []string {
	repo, err := git.PlainOpenWithOptions(root, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil
	}
	remotes, err := repo.Remotes()
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range remotes {
		out = append(out, r.Config().URLs...)
	}
	return out
}

// repoSet tells whether a URL names the repository being checked.
type repoSet map[string]bool

func newRepoSet(urls ...string) repoSet {
	s := repoSet{}
	for _, u := range urls {
		if n := NormalizeRepoURL(u); n != "" && n != "/" {
			s[n] = true
		}
	}
	return s
}

func (s repoSet) has(u string) bool { return s[NormalizeRepoURL(u)] }
