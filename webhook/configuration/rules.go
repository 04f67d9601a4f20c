package configuration

import (
	"slices"
	"strings"
)

// rule is one webhook rule: a request matches when every dimension matches.
// Every list is sorted, free of duplicates and of entries a wildcard in the
// same list already covers, which also keeps it valid for the API server
// ("if '*' is present, must not specify other ...").
type rule struct {
	operations, apiGroups, apiVersions, resources []string
	scope                                         string
}

const (
	wildcard        = "*"
	allSubresources = "*/*"
	leasesGroup     = "coordination.k8s.io"
	leasesResource  = "leases"
)

// The dimensions of a rule besides its scope.
const (
	dimOperations = iota
	dimGroups
	dimVersions
	dimResources
	dimensions
)

// Separators of rule keys; they cannot occur in a rule's strings.
const (
	keySeparator  = "\x00"
	listSeparator = "\x01"
)

func (r rule) dim(d int) []string {
	switch d {
	case dimOperations:
		return r.operations
	case dimGroups:
		return r.apiGroups
	case dimVersions:
		return r.apiVersions
	default:
		return r.resources
	}
}

func (r rule) withDim(d int, xs []string) rule {
	switch d {
	case dimOperations:
		r.operations = normalize(xs)
	case dimGroups:
		r.apiGroups = normalize(xs)
	case dimVersions:
		r.apiVersions = normalize(xs)
	default:
		r.resources = normalizeResources(xs)
	}
	return r
}

// key identifies the rule without dimension skip (-1 for none).
func (r rule) key(skip int) string {
	parts := make([]string, 0, dimensions+1)
	for d := range dimensions {
		if d == skip {
			parts = append(parts, "")
			continue
		}
		parts = append(parts, strings.Join(r.dim(d), listSeparator))
	}
	return strings.Join(append(parts, r.scope), keySeparator)
}

// normalize sorts and dedupes; "*" stands alone.
func normalize(xs []string) []string {
	if slices.Contains(xs, wildcard) {
		return []string{wildcard}
	}
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// normalizeResources sorts, dedupes and drops what a wildcard covers:
// "*/*" covers everything, "*" every resource without subresource, "x/*"
// every subresource of x, "*/s" subresource s of every resource.
func normalizeResources(xs []string) []string {
	if slices.Contains(xs, allSubresources) {
		return []string{allSubresources}
	}
	var out []string
	for _, x := range xs {
		if !coveredByOthers(xs, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// coveredByOthers reports whether a wildcard entry of xs other than x
// itself covers x.
func coveredByOthers(xs []string, x string) bool {
	res, sub, hasSub := strings.Cut(x, "/")
	if !hasSub {
		return x != wildcard && slices.Contains(xs, wildcard)
	}
	if res == wildcard || sub == wildcard {
		// "*/s" and "x/*" are only covered by "*/*", handled by the caller.
		return false
	}
	return slices.Contains(xs, res+"/"+wildcard) || slices.Contains(xs, wildcard+"/"+sub)
}

// coversResource reports whether the resource list xs matches every request
// resource entry x matches.
func coversResource(xs []string, x string) bool {
	if slices.Contains(xs, x) || slices.Contains(xs, allSubresources) {
		return true
	}
	return coveredByOthers(xs, x)
}

func coversList(xs []string, x string) bool {
	return slices.Contains(xs, x) || slices.Contains(xs, wildcard)
}

// covers reports whether every request other matches is matched by r.
func (r rule) covers(other rule) bool {
	if r.scope != wildcard && r.scope != other.scope {
		return false
	}
	for d := range dimensions {
		for _, x := range other.dim(d) {
			if d == dimResources && !coversResource(r.resources, x) ||
				d != dimResources && !coversList(r.dim(d), x) {
				return false
			}
		}
	}
	return true
}

// mergeRules returns rules matching exactly the requests of the given ones,
// in fewer rules and in a stable order: two rules that differ in one
// dimension only become one with the union of that dimension (the set of
// matched requests is the same), and a rule another covers is dropped.
func mergeRules(rules []rule) []rule {
	rules = slices.Clone(rules)
	for merged := true; merged; {
		merged = false
		for d := range dimensions {
			var m bool
			rules, m = mergeAlong(rules, d)
			merged = merged || m
		}
	}
	var out []rule
	for i, r := range rules {
		covered := false
		for j, c := range rules {
			// Rules are unique by now, so of two that cover each other
			// (equal sets written differently) the first is kept.
			if i != j && c.covers(r) && (!r.covers(c) || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, r)
		}
	}
	sortRules(out)
	return out
}

// mergeAlong unites rules that are equal except in dimension d.
func mergeAlong(rules []rule, d int) ([]rule, bool) {
	sortRules(rules)
	index := map[string]int{}
	var out []rule
	merged := false
	for _, r := range rules {
		k := r.key(d)
		i, ok := index[k]
		if !ok {
			index[k] = len(out)
			out = append(out, r)
			continue
		}
		merged = true
		out[i] = out[i].withDim(d, append(slices.Clone(out[i].dim(d)), r.dim(d)...))
	}
	return out, merged
}

func sortRules(rules []rule) {
	slices.SortFunc(rules, func(a, b rule) int { return strings.Compare(a.key(-1), b.key(-1)) })
}

// matchesAllResources: a wildcard resource in any group.
func (r rule) matchesAllResources() bool {
	return slices.Contains(r.resources, wildcard) || slices.Contains(r.resources, allSubresources)
}

// matchesLeases reports whether r can match coordination.k8s.io Leases.
// Versions are not looked at: with matchPolicy Equivalent any version of
// the group can bring a Lease.
func (r rule) matchesLeases() bool {
	return coversList(r.apiGroups, leasesGroup) && coversResource(r.resources, leasesResource)
}

// namesLeases reports whether r names Leases explicitly.
func (r rule) namesLeases() bool {
	return slices.Contains(r.apiGroups, leasesGroup) && slices.Contains(r.resources, leasesResource)
}
