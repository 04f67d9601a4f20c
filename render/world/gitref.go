package world

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
)

// fluxDefaultBranch is the branch source-controller checks out when a
// GitRepository's spec.ref names nothing (fluxcd/pkg/git.DefaultBranch).
const fluxDefaultBranch = "master"

// gitRevision is the revision to check out for a GitRepository's
// spec.ref, picked as source-controller's Git client picks it: commit,
// then name, then tag, then semver (resolved against the repository's
// tags), then branch, master when none is set. A commit is checked out
// whatever branch is named with it.
func (l *loader) gitRevision(ctx context.Context, subject, url string, obj *unstructured.Unstructured) (string, error) {
	ref, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "ref")
	switch {
	case ref["commit"] != "":
		return ref["commit"], nil
	case ref["name"] != "":
		return ref["name"], nil
	case ref["tag"] != "":
		return "refs/tags/" + ref["tag"], nil
	case ref["semver"] != "":
		return l.semverTag(ctx, subject, url, ref["semver"])
	case ref["branch"] != "":
		return "refs/heads/" + ref["branch"], nil
	}
	return "refs/heads/" + fluxDefaultBranch, nil
}

// semverTag is the tag of url that source-controller checks out for a
// semver range: the highest version among the tags that parse as
// versions (strictly, a leading v allowed) and meet the range.
func (l *loader) semverTag(ctx context.Context, subject, url, constraint string) (string, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("%s: semver parse error: %w", subject, err)
	}
	if l.opts.Render.Offline {
		return "", unpredictable(subject, "resolving semver %s against the tags of %s needs the network (--offline)", constraint, url)
	}
	auth, err := l.gitAuth(url)
	if err != nil {
		return "", err
	}
	tags, err := manifest.GitTags(ctx, manifest.GitSource{URL: url, Auth: auth})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", unpredictable(subject, "cannot list the tags of %s: %v", url, err)
	}
	tag, ok := highestTag(tags, c)
	if !ok {
		return "", fmt.Errorf("%s: no match found for semver: %s", subject, constraint)
	}
	return "refs/tags/" + tag, nil
}

// highestTag picks among tags as source-controller does. Versions equal
// but for build metadata are ordered by the tagged commit's time there;
// here by tag name, which needs no clone.
func highestTag(tags []string, c *semver.Constraints) (string, bool) {
	var matched []*semver.Version
	for _, tag := range tags {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(tag, "v")); err != nil {
			continue
		}
		v, err := semver.NewVersion(tag)
		if err != nil || !c.Check(v) {
			continue
		}
		matched = append(matched, v)
	}
	if len(matched) == 0 {
		return "", false
	}
	sort.SliceStable(matched, func(i, j int) bool {
		if !matched[i].Equal(matched[j]) {
			return matched[i].LessThan(matched[j])
		}
		return matched[i].Original() < matched[j].Original()
	})
	return matched[len(matched)-1].Original(), true
}
