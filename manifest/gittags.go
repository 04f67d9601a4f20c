package manifest

import (
	"context"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// GitTags lists the tag names (v1.2.0, not refs/tags/v1.2.0) of the
// repository src.URL names, sorted: a remote one is asked with one
// ls-remote (with src.Auth) and nothing is fetched; a local one's refs
// are read in place. src.Ref and src.Path are not used. Flux's
// GitRepository spec.ref.semver picks among these.
func GitTags(ctx context.Context, src GitSource) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, newError(Source{File: src.URL}, err, "listing tags stopped: "+err.Error())
	}
	var out []string
	if src.URL == "" || !isRemoteURL(src.URL) {
		repo, _, _, err := openRepository(ctx, src)
		if err != nil {
			return nil, err
		}
		refs, err := repo.Tags()
		if err != nil {
			return nil, newError(Source{File: src.URL}, err, "cannot list the tags of Git repository: "+err.Error())
		}
		err = refs.ForEach(func(r *plumbing.Reference) error {
			out = append(out, r.Name().Short())
			return nil
		})
		if err != nil {
			return nil, newError(Source{File: src.URL}, err, "cannot list the tags of Git repository: "+err.Error())
		}
	} else {
		refs, err := listRemote(ctx, src)
		if err != nil {
			return nil, err
		}
		for name := range refs.byName {
			if name.IsTag() {
				out = append(out, strings.TrimPrefix(name.String(), "refs/tags/"))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
